#include "wire/hidden_frame.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <set>

#include <capnp/message.h>

#include "tests/wire/wire_test_util.h"
#include "wire/envelope.h"
#include "wire/messages.h"
#include "wire/tensor_codec.h"

namespace lockstep::wire {
namespace {

using testing::AdversarialBits;
using testing::FloatsFromBits;
using testing::MakeHidden;
using testing::RandomFloats;
using testing::SameBits;

constexpr uint32_t kSmolLm2Width = 576;

void ExpectSameFrame(const HiddenFrame& a, const HiddenFrame& b) {
  EXPECT_EQ(a.session_id, b.session_id);
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.first_position, b.first_position);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.hidden, b.hidden);
  EXPECT_EQ(a.resume_layer, b.resume_layer);
  EXPECT_TRUE(SameBits(a.payload, b.payload));
}

HiddenFrame RoundTrip(const HiddenFrame& in) {
  Frame bytes = MarshalHidden(in);
  Result<HiddenFrame> out = UnmarshalHidden(bytes);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : HiddenFrame{};
}

TEST(HiddenFrameTest, RandomPayloadsRoundTripBitForBit) {
  for (uint32_t seq : {1u, 2u, 7u, 64u}) {
    for (uint32_t hidden : {1u, 3u, kSmolLm2Width}) {
      HiddenFrame in = MakeHidden(seq, hidden, seq * 1000 + hidden);
      ExpectSameFrame(in, RoundTrip(in));
    }
  }
}

TEST(HiddenFrameTest, RandomGeneratorVaries) {
  std::vector<float> p = RandomFloats(576, 1);
  std::set<uint32_t> distinct;
  for (float f : p) distinct.insert(std::bit_cast<uint32_t>(f));
  EXPECT_GT(distinct.size(), 570u);
  EXPECT_FALSE(SameBits(p, RandomFloats(576, 2)));
}

TEST(HiddenFrameTest, AdversarialBitPatternsSurvive) {
  const std::vector<uint32_t> bits = AdversarialBits();
  HiddenFrame in;
  in.seq = 1;
  in.hidden = static_cast<uint32_t>(bits.size());
  in.payload = FloatsFromBits(bits);
  HiddenFrame out = RoundTrip(in);
  ASSERT_EQ(out.payload.size(), bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    uint32_t got;
    std::memcpy(&got, &out.payload[i], 4);
    EXPECT_EQ(got, bits[i]) << "index " << i;
  }
}

TEST(HiddenFrameTest, ExtremeHeaderValuesRoundTrip) {
  HiddenFrame in = MakeHidden(2, 5, 3);
  in.session_id = ~uint64_t{0};
  in.step = ~uint32_t{0};
  in.first_position = ~uint32_t{0};
  in.resume_layer = 0;
  ExpectSameFrame(in, RoundTrip(in));
}

// A long prefill's frame is larger than Cap'n Proto's default reader
// traversal limit (8 Mi words = 64 MiB): marshalling it in place must not
// trip that limit, and it decodes (under limits that admit its size) to
// the same frame.
TEST(HiddenFrameTest, FrameOverTheDefaultTraversalLimitMarshals) {
  HiddenFrame big = MakeHidden(1, 2048, 3);
  big.seq = 9000;
  big.payload.resize(size_t{big.seq} * big.hidden, 0.5f);
  const Frame frame = MarshalHidden(big);
  ASSERT_GT(frame.size(), size_t{64} << 20);
  DecodeLimits limits;
  limits.max_frame_bytes = frame.size();
  Result<HiddenFrame> back = UnmarshalHidden(frame, limits);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->seq, big.seq);
  EXPECT_TRUE(SameBits(back->payload, big.payload));
}

TEST(HiddenFrameTest, MarshalIsDeterministic) {
  HiddenFrame in = MakeHidden(3, kSmolLm2Width, 9);
  EXPECT_EQ(MarshalHidden(in), MarshalHidden(in));
}

TEST(HiddenFrameTest, InPlaceEncodingEqualsCanonicalisedBuilder) {
  for (uint32_t resume_layer : {0u, 1u, 29u}) {  // 0 takes the fallback path
    HiddenFrame in = MakeHidden(3, 5, resume_layer);
    in.resume_layer = resume_layer;
    capnp::MallocMessageBuilder message;
    internal::WriteHidden(in, message.initRoot<schema::Envelope>().initHidden());
    EXPECT_EQ(MarshalHidden(in), MarshalEnvelope(message)) << resume_layer;
  }
}

TEST(HiddenFrameTest, DigestCoversHeaderAndPayload) {
  HiddenFrame a = MakeHidden(1, 8, 4);
  HiddenFrame b = a;
  b.resume_layer += 1;
  EXPECT_NE(HiddenFrameDigest(a), HiddenFrameDigest(b));
  b = a;
  b.payload[3] = -b.payload[3];  // sign flip through a float op on purpose
  EXPECT_NE(HiddenFrameDigest(a), HiddenFrameDigest(b));
}

TEST(HiddenFrameTest, MisalignedInputIsCopiedAndDecoded) {
  HiddenFrame in = MakeHidden(2, kSmolLm2Width, 5);
  Frame bytes = MarshalHidden(in);
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  Result<HiddenFrame> out =
      UnmarshalHidden(std::span<const uint8_t>(shifted.data() + 1, bytes.size()));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  ExpectSameFrame(in, *out);
}

TEST(LogitsTest, RoundTripBitForBit) {
  Logits in;
  in.session_id = 99;
  in.step = 3;
  in.vocab = 49152;
  in.payload = RandomFloats(in.vocab, 17);
  std::vector<float> adversarial = FloatsFromBits(AdversarialBits());
  std::copy(adversarial.begin(), adversarial.end(), in.payload.begin());
  Result<Logits> out = UnmarshalLogits(MarshalLogits(in));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->session_id, 99u);
  EXPECT_EQ(out->step, 3u);
  EXPECT_EQ(out->vocab, 49152u);
  EXPECT_TRUE(SameBits(in.payload, out->payload));
}

TEST(LogitsTest, FlippedPayloadBitIsDigestMismatch) {
  Logits in{5, 6, 10, RandomFloats(10, 1), {}};
  Frame bytes = MarshalLogits(in);
  bytes[bytes.size() - 48] ^= 0x01;  // inside the payload, before the digest
  Result<Logits> out = UnmarshalLogits(bytes);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().kind(), ErrorKind::kCorrupt);
  EXPECT_EQ(out.status().message(), "logits digest mismatch (session 5 step 6)");
}

TEST(LogitsTest, HiddenFrameIsNotLogits) {
  Result<Logits> out = UnmarshalLogits(MarshalHidden(MakeHidden(1, 4, 1)));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep::wire
