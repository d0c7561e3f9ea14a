// The chain handoff on the wire: StepResult, ChainHandoff on TokenInput and
// HiddenFrame, and SessionOpen's sampling. Round trips keep every field;
// junk, truncated and bit-flipped frames are refused, never half-read.
#include <gtest/gtest.h>

#include <cstring>

#include <capnp/message.h>

#include "tests/wire/wire_test_util.h"
#include "wire/envelope.h"
#include "wire/messages.h"

namespace lockstep::wire {
namespace {

Sha256State StateAfter(size_t bytes) {
  Sha256Stream s;
  std::vector<uint8_t> msg(bytes);
  for (size_t i = 0; i < bytes; ++i) msg[i] = static_cast<uint8_t>(i * 7 + 1);
  s.Update(msg);
  return s.Export();
}

StepResult MakeResult() {
  return StepResult{0x0102030405060708ull, 41, 49151, Sha256(std::string_view("logits")),
                    StateAfter(1000), {}, {}};
}

Result<Message> Parse(const Frame& f) { return ParseMessage(f); }

TEST(StepResultTest, RoundTripsEveryField) {
  const StepResult in = MakeResult();
  Result<Message> out = Parse(MarshalMessage(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto* r = std::get_if<StepResult>(&*out);
  ASSERT_NE(r, nullptr) << MessageName(*out);
  EXPECT_EQ(r->session_id, in.session_id);
  EXPECT_EQ(r->step, in.step);
  EXPECT_EQ(r->token, in.token);
  EXPECT_EQ(r->logits_sha256, in.logits_sha256);
  EXPECT_EQ(r->chain_state, in.chain_state);
  EXPECT_STREQ(MessageName(*out), "stepResult");
  // A step's answer is small: the point of not shipping logits.
  EXPECT_LT(MarshalMessage(in).size(), 300u);
}

TEST(StepResultTest, EverySingleBitFlipIsRejectedOrMeaningless) {
  // Only the Envelope's 16 padding bits are free; the digest covers every
  // StepResult field, and the chain state must also be consistent. (A flip
  // of the union tag may name another member, which is then not a
  // StepResult: what UnmarshalHidden calls "expected a hidden frame".)
  const Frame good = MarshalMessage(MakeResult());
  int unnoticed = 0;
  for (size_t bit = 0; bit < good.size() * 8; ++bit) {
    Frame bad = good;
    bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    Result<Message> out = Parse(bad);
    if (out.ok() && !std::holds_alternative<StepResult>(*out)) continue;
    if (out.ok()) {
      ++unnoticed;
      ASSERT_EQ(MarshalMessage(*out), good) << "bit " << bit << " changed the frame";
      continue;
    }
    ASSERT_TRUE(out.status().kind() == ErrorKind::kCorrupt ||
                out.status().kind() == ErrorKind::kInvalid)
        << "bit " << bit << ": " << out.status().ToString();
  }
  EXPECT_LE(unnoticed, 16 + 2 * 30);  // + the empty layer-digest and later-rows blobs' offset bits
}

TEST(StepResultTest, TruncatedFramesAreRefused) {
  const Frame good = MarshalMessage(MakeResult());
  for (size_t n = 0; n < good.size(); ++n) {
    Frame cut(good.begin(), good.begin() + static_cast<long>(n));
    Result<Message> out = Parse(cut);
    ASSERT_FALSE(out.ok()) << n << " bytes";
  }
}

// A StepResult built field by field, so tests can put junk where the
// marshaller never would.
Frame RawResult(size_t state_bytes, const Sha256State& state, size_t sha_bytes) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::Envelope>();
  root.setVersion(kProtocolVersion);
  auto r = root.initStepResult();
  r.setSessionId(9);
  r.setStep(1);
  r.setToken(2);
  const Digest sha = Sha256(std::string_view("x"));
  r.setLogitsSha256(capnp::Data::Reader(sha.data(), sha_bytes));
  std::vector<uint8_t> st(state.bytes.begin(), state.bytes.end());
  st.resize(state_bytes, 0);
  r.setChainState(capnp::Data::Reader(st.data(), st.size()));
  r.setDigest(capnp::Data::Reader(sha.data(), sha.size()));
  return MarshalEnvelope(message);
}

TEST(StepResultTest, JunkFieldsAreCorruptAndNamed) {
  const Sha256State good = StateAfter(70);
  struct Case {
    const char* name;
    Frame frame;
    const char* expect;
  };
  Sha256State inconsistent = good;
  inconsistent.bytes[104] = 9;  // num 9 for a 70-byte stream
  Sha256State junk;
  junk.bytes.fill(0xa5);
  const Case cases[] = {
      {"short chain state", RawResult(107, good, 32), "107 bytes"},
      {"long chain state", RawResult(200, good, 32), "200 bytes"},
      {"no chain state", RawResult(0, good, 32), "0 bytes"},
      {"inconsistent chain state", RawResult(108, inconsistent, 32), "disagrees"},
      {"junk chain state", RawResult(108, junk, 32), "stepResult.chainState"},
      {"short logits sha", RawResult(108, good, 31), "stepResult.logitsSha256"},
      {"wrong digest", RawResult(108, good, 32), "step result digest mismatch"},
  };
  for (const Case& c : cases) {
    Result<Message> out = Parse(c.frame);
    ASSERT_FALSE(out.ok()) << c.name;
    EXPECT_EQ(out.status().kind(), ErrorKind::kCorrupt) << c.name;
    EXPECT_NE(out.status().message().find(c.expect), std::string::npos)
        << c.name << ": " << out.status().message();
  }
  // The receiver can still fail just that session.
  EXPECT_EQ(SessionOfRefusedFrame(RawResult(108, junk, 32)), std::optional<uint64_t>(9));
}

// A one-token decode step of session 3 carrying `handoff`.
TokenInput DecodeWith(ChainHandoff handoff) {
  TokenInput in;
  in.session_id = 3;
  in.step = 4;
  in.first_position = 5;
  in.token_ids = {6};
  in.handoff = handoff;
  return in;
}

TEST(ChainHandoffTest, TokenInputCarriesIt) {
  TokenInput in = DecodeWith(ChainHandoff{17, StateAfter(333)});
  Result<Message> out = Parse(MarshalMessage(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto& t = std::get<TokenInput>(*out);
  ASSERT_TRUE(t.handoff.has_value());
  EXPECT_EQ(*t.handoff, *in.handoff);
  in.handoff.reset();
  Result<Message> none = Parse(MarshalMessage(in));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(std::get<TokenInput>(*none).handoff.has_value());
}

TEST(ChainHandoffTest, JunkStateInATokenInputIsCorrupt) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::Envelope>();
  root.setVersion(kProtocolVersion);
  auto t = root.initDecode();
  t.setSessionId(1);
  t.initTokenIds(1).set(0, 5);
  auto h = t.initHandoff();
  h.setDecodeStep(2);
  std::vector<uint8_t> junk(108, 0xff);
  h.setChainState(capnp::Data::Reader(junk.data(), junk.size()));
  Result<Message> out = ParseMessage(MarshalEnvelope(message));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(out.status().message().find("decode chain handoff"), std::string::npos)
      << out.status().message();
}

TEST(ChainHandoffTest, HiddenFrameCarriesItUnderItsDigest) {
  HiddenFrame in = testing::MakeHidden(1, 8, 3);
  in.handoff = ChainHandoff{5, StateAfter(129)};
  const Frame good = MarshalHidden(in);
  Result<HiddenFrame> out = UnmarshalHidden(good);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ASSERT_TRUE(out->handoff.has_value());
  EXPECT_EQ(*out->handoff, *in.handoff);
  // The digest binds the handoff: another decode step is another digest.
  HiddenFrame other = in;
  other.handoff->decode_step = 6;
  EXPECT_NE(HiddenFrameDigest(other), HiddenFrameDigest(in));
  HiddenFrame none = in;
  none.handoff.reset();
  EXPECT_NE(HiddenFrameDigest(none), HiddenFrameDigest(in));
  // Every flip is refused, or lands in padding (Envelope 16 bits,
  // HiddenFrame 32, ChainHandoff 32) or in the offset of the empty
  // layer-digest blob's pointer (30 bits), and changes nothing.
  int unnoticed = 0;
  for (size_t bit = 0; bit < good.size() * 8; ++bit) {
    Frame bad = good;
    bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    Result<HiddenFrame> got = UnmarshalHidden(bad);
    if (got.ok()) {
      ++unnoticed;
      ASSERT_EQ(MarshalHidden(*got), good) << "bit " << bit << " changed the frame";
    }
  }
  EXPECT_LE(unnoticed, 80 + 30);
}

TEST(ChainHandoffTest, ARelayTravelsUnderTheHiddenFramesDigest) {
  HiddenFrame in = testing::MakeHidden(1, 8, 3);
  in.handoff = ChainHandoff{5, StateAfter(129), 7};
  Result<HiddenFrame> out = UnmarshalHidden(MarshalHidden(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->handoff->relay, 7u);
  HiddenFrame fewer = in, none = in;
  fewer.handoff->relay = 6;
  none.handoff->relay = 0;
  EXPECT_NE(HiddenFrameDigest(fewer), HiddenFrameDigest(in));
  EXPECT_NE(HiddenFrameDigest(none), HiddenFrameDigest(in));
}

TEST(ChainHandoffTest, ARelayedStepRoundTripsAndIsMarshalledInPlaceToTheSameBytes) {
  TokenInput in = DecodeWith(ChainHandoff{17, StateAfter(333), 9});
  in.relayed = true;
  Frame fast;
  MarshalTokenInput(in, &fast);
  EXPECT_EQ(fast, MarshalMessage(in));
  Result<Message> out = Parse(fast);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  const auto& t = std::get<TokenInput>(*out);
  EXPECT_TRUE(t.relayed);
  EXPECT_EQ(*t.handoff, *in.handoff);
  // A relayed step names the chain it continues: without one it is refused.
  in.handoff.reset();
  Result<Message> bare = Parse(MarshalMessage(in));
  ASSERT_FALSE(bare.ok());
  EXPECT_EQ(bare.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(bare.status().message().find("relayed step without a chain handoff"),
            std::string::npos)
      << bare.status().message();
}

TEST(SessionOpenTest, SamplingRoundTripsAndDefaultsToGreedy) {
  SessionOpen open;
  open.session_id = 12;
  open.sampling = Sampling{0x3f000000u, 40, 0x3f666666u, 0xfeedfacecafebeefull};
  Result<Message> out = Parse(MarshalMessage(open));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(std::get<SessionOpen>(*out).sampling, open.sampling);

  capnp::MallocMessageBuilder message;  // a SessionOpen without sampling
  auto root = message.initRoot<schema::Envelope>();
  root.setVersion(kProtocolVersion);
  root.initSessionOpen().setSessionId(13);
  Result<Message> bare = ParseMessage(MarshalEnvelope(message));
  ASSERT_TRUE(bare.ok()) << bare.status().ToString();
  EXPECT_EQ(std::get<SessionOpen>(*bare).sampling, Sampling{});
}

}  // namespace
}  // namespace lockstep::wire
