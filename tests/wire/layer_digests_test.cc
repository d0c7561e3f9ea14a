// The receipts' trace mode on the wire: SessionOpen.trace and the per-layer
// digests appended to HiddenFrame, Logits and StepResult. They round trip,
// the frame digests cover them (every bit flip is refused or meaningless),
// a blob that is not whole 32-byte digests is Corrupt, and untraced frames
// keep their digests unchanged.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include "wire/envelope.h"
#include "wire/messages.h"

namespace lockstep::wire {
namespace {

std::vector<Digest> Layers(int n) {
  std::vector<Digest> d;
  for (int i = 0; i < n; ++i) d.push_back(Sha256(std::string_view("layer " + std::to_string(i))));
  return d;
}

HiddenFrame TracedHidden() {
  HiddenFrame h{7, 2, 5, 1, 4, 3, {1.5f, -2.0f, 0.0f, 8.0f}, std::nullopt, false, Layers(3)};
  Sha256Stream s;
  s.Update(h.layer_digests[0]);
  h.handoff = ChainHandoff{2, s.Export()};
  return h;
}

// Every bit of `good` flipped in turn: refused, or decoded to the same frame.
void ExpectEveryFlipRefusedOrMeaningless(const Frame& good, int free_bits) {
  int unnoticed = 0;
  for (size_t bit = 0; bit < good.size() * 8; ++bit) {
    Frame bad = good;
    bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    Result<Message> out = ParseMessage(bad);
    if (!out.ok()) continue;
    if (MarshalMessage(*out) == good) {
      ++unnoticed;
      continue;
    }
    // A flipped union tag may name another member, which then parses as that.
    ASSERT_NE(MessageName(*out), MessageName(*ParseMessage(good))) << "bit " << bit;
  }
  EXPECT_LE(unnoticed, free_bits);
}

TEST(LayerDigestsTest, HiddenFrameRoundTripsAndTheDigestCoversThem) {
  const HiddenFrame in = TracedHidden();
  Result<HiddenFrame> out = UnmarshalHidden(MarshalHidden(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->layer_digests, in.layer_digests);
  EXPECT_EQ(out->handoff, in.handoff);
  HiddenFrame untraced = in;
  untraced.layer_digests.clear();
  EXPECT_NE(HiddenFrameDigest(in), HiddenFrameDigest(untraced));
  HiddenFrame other = in;
  other.layer_digests[2][0] ^= 1;
  EXPECT_NE(HiddenFrameDigest(in), HiddenFrameDigest(other));
  // Free: padding in Envelope (16 bits), HiddenFrame (32) and ChainHandoff (32).
  ExpectEveryFlipRefusedOrMeaningless(MarshalHidden(in), 16 + 32 + 32);
}

TEST(LayerDigestsTest, LogitsAndStepResultCarryThem) {
  Logits l{3, 1, 2, {0.25f, -1.0f}, Layers(4)};
  Result<Logits> lo = UnmarshalLogits(MarshalLogits(l));
  ASSERT_TRUE(lo.ok()) << lo.status().ToString();
  EXPECT_EQ(lo->layer_digests, l.layer_digests);
  ExpectEveryFlipRefusedOrMeaningless(MarshalLogits(l), 16);

  Sha256Stream s;
  s.Update(Layers(1)[0]);
  StepResult r{9, 4, 17, Sha256(std::string_view("logits")), s.Export(), Layers(5), {}};
  Result<Message> ro = ParseMessage(MarshalMessage(r));
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_EQ(std::get<StepResult>(*ro).layer_digests, r.layer_digests);
  StepResult untraced = r;
  untraced.layer_digests.clear();
  EXPECT_NE(StepResultDigest(r), StepResultDigest(untraced));
  ExpectEveryFlipRefusedOrMeaningless(MarshalMessage(r), 16 + 30);  // + the empty later-rows blob's offset bits
}

TEST(LayerDigestsTest, SessionOpenCarriesTheTraceFlag) {
  for (bool trace : {false, true}) {
    SessionOpen open;
    open.session_id = 5;
    open.trace = trace;
    Result<Message> out = ParseMessage(MarshalMessage(open));
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    EXPECT_EQ(std::get<SessionOpen>(*out).trace, trace);
  }
}

TEST(LayerDigestsTest, PartialDigestsAreCorruptAndNamed) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::Envelope>();
  root.setVersion(kProtocolVersion);
  auto l = root.initLogits();
  l.setSessionId(1);
  l.setStep(0);
  l.setVocab(1);
  const float one = 1.0f;
  l.setPayload(capnp::Data::Reader(reinterpret_cast<const uint8_t*>(&one), 4));
  const Digest d = Sha256(std::string_view("x"));
  l.setDigest(capnp::Data::Reader(d.data(), d.size()));
  l.setLayerDigests(capnp::Data::Reader(d.data(), 31));
  Result<Message> out = ParseMessage(MarshalEnvelope(message));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(out.status().message().find("logits layer digests are 31 bytes"), std::string::npos)
      << out.status().message();
}

}  // namespace
}  // namespace lockstep::wire
