// Every class of damaged hidden frame is refused with the right kind, and
// the decoder never reads outside the bytes it was given (run under ASan
// to check the latter).
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include <capnp/message.h>

#include "tests/wire/wire_test_util.h"
#include "wire/envelope.h"
#include "wire/hidden_frame.h"
#include "wire/messages.h"

namespace lockstep::wire {
namespace {

using testing::MakeHidden;

constexpr uint32_t kWidth = 576;

// Canonical frame of `message` exactly as built: unlike MarshalEnvelope it
// does not force the version, so tests can send any header.
Frame RawFrame(capnp::MessageBuilder& message) {
  auto words = capnp::canonicalize(message.getRoot<schema::Envelope>().asReader());
  Frame frame(8 + words.size() * 8, 0);
  const uint32_t n = static_cast<uint32_t>(words.size());
  std::memcpy(frame.data() + 4, &n, 4);
  std::memcpy(frame.data() + 8, words.begin(), words.size() * 8);
  return frame;
}

// A hidden frame with arbitrary (possibly inconsistent) fields.
Frame CraftHidden(uint32_t version, uint32_t seq, uint32_t hidden,
                  size_t payload_bytes, size_t digest_bytes = 32) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::Envelope>();
  root.setVersion(version);
  auto h = root.initHidden();
  h.setSessionId(1);
  h.setStep(2);
  h.setSeq(seq);
  h.setHidden(hidden);
  h.initPayload(payload_bytes);
  h.initDigest(digest_bytes);
  return RawFrame(message);
}

Status DecodeStatus(std::span<const uint8_t> bytes, const DecodeLimits& limits = {}) {
  return UnmarshalHidden(bytes, limits).status();
}

TEST(HiddenFrameMalformedTest, TruncatedAtEveryLengthIsCorrupt) {
  const Frame frame = MarshalHidden(MakeHidden(1, kWidth, 1));
  for (size_t len = 0; len < frame.size(); ++len) {
    // A fresh allocation of exactly `len` bytes lets ASan catch over-reads.
    std::vector<uint8_t> cut(frame.begin(), frame.begin() + len);
    Status st = DecodeStatus(cut);
    ASSERT_EQ(st.kind(), ErrorKind::kCorrupt) << "length " << len << ": " << st.ToString();
  }
}

TEST(HiddenFrameMalformedTest, TrailingBytesAreCorrupt) {
  Frame frame = MarshalHidden(MakeHidden(1, 8, 1));
  frame.resize(frame.size() + 8, 0);
  EXPECT_EQ(DecodeStatus(frame).kind(), ErrorKind::kCorrupt);
}

TEST(HiddenFrameMalformedTest, OversizedFrameIsRefusedBeforeParsing) {
  const Frame frame = MarshalHidden(MakeHidden(4, kWidth, 1));
  DecodeLimits limits;
  limits.max_frame_bytes = frame.size() - 1;
  Status st = DecodeStatus(frame, limits);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_NE(st.message().find("exceeds the limit"), std::string::npos) << st.ToString();
  limits.max_frame_bytes = frame.size();
  EXPECT_TRUE(DecodeStatus(frame, limits).ok());
}

TEST(HiddenFrameMalformedTest, PayloadSizeDisagreeingWithDimsIsCorrupt) {
  Status st = DecodeStatus(CraftHidden(kProtocolVersion, 2, 4, 7 * 4));
  EXPECT_EQ(st.kind(), ErrorKind::kCorrupt);
  EXPECT_NE(st.message().find("payload is 28 bytes"), std::string::npos) << st.ToString();
  EXPECT_EQ(DecodeStatus(CraftHidden(kProtocolVersion, 2, 4, 8 * 4 + 1)).kind(),
            ErrorKind::kCorrupt);
}

TEST(HiddenFrameMalformedTest, ZeroDimsAreCorrupt) {
  for (auto [seq, hidden] : {std::pair{0u, 4u}, std::pair{4u, 0u}, std::pair{0u, 0u}}) {
    Status st = DecodeStatus(CraftHidden(kProtocolVersion, seq, hidden, 0));
    EXPECT_EQ(st.kind(), ErrorKind::kCorrupt) << st.ToString();
    EXPECT_NE(st.message().find("zero dimension"), std::string::npos);
  }
}

TEST(HiddenFrameMalformedTest, OverflowingDimsAreCorrupt) {
  // seq * hidden * 4 wraps to 4 in 32 and 64 bits alike for these values.
  EXPECT_EQ(DecodeStatus(CraftHidden(kProtocolVersion, 0xffffffffu, 0xffffffffu, 4)).kind(),
            ErrorKind::kCorrupt);
  EXPECT_EQ(DecodeStatus(CraftHidden(kProtocolVersion, 0x40000000u, 4u, 0)).kind(),
            ErrorKind::kCorrupt);
  EXPECT_EQ(DecodeStatus(CraftHidden(kProtocolVersion, 0x80000000u, 0x80000000u, 0)).kind(),
            ErrorKind::kCorrupt);
}

TEST(HiddenFrameMalformedTest, WrongVersionIsInvalid) {
  for (uint32_t version : {0u, kProtocolVersion + 1, 0xffffffffu}) {
    Status st = DecodeStatus(CraftHidden(version, 1, 4, 16));
    EXPECT_EQ(st.kind(), ErrorKind::kInvalid) << st.ToString();
    EXPECT_NE(st.message().find("protocol version"), std::string::npos);
  }
}

TEST(HiddenFrameMalformedTest, DigestOfWrongSizeIsCorrupt) {
  for (size_t n : {0u, 31u, 33u}) {
    EXPECT_EQ(DecodeStatus(CraftHidden(kProtocolVersion, 1, 4, 16, n)).kind(),
              ErrorKind::kCorrupt);
  }
}

TEST(HiddenFrameMalformedTest, FlippedPayloadBitIsDigestMismatch) {
  HiddenFrame in = MakeHidden(3, kWidth, 2);
  in.session_id = 42;
  in.step = 17;
  const Frame good = MarshalHidden(in);
  // The payload blob precedes the 32-byte digest blob at the end.
  const size_t payload_end = good.size() - 32;
  for (size_t offset : {payload_end - 1, payload_end - 4 * kWidth, payload_end - 3 * 4 * kWidth}) {
    Frame bad = good;
    bad[offset] ^= 0x10;
    Status st = DecodeStatus(bad);
    EXPECT_EQ(st.kind(), ErrorKind::kCorrupt);
    EXPECT_EQ(st.message(), "hidden frame digest mismatch (session 42 step 17)");
  }
}

// Finds the byte offsets where two frames differ.
std::vector<size_t> Diff(const Frame& a, const Frame& b) {
  std::vector<size_t> at;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    if (a[i] != b[i]) at.push_back(i);
  }
  return at;
}

TEST(HiddenFrameMalformedTest, FlippedHeaderFieldBitIsRejected) {
  const HiddenFrame base = MakeHidden(2, 16, 3);
  // Locate each header field by changing only its lowest bit.
  std::vector<std::pair<const char*, HiddenFrame>> variants;
  auto add = [&](const char* name, auto mutate) {
    HiddenFrame v = base;
    mutate(v);
    variants.emplace_back(name, v);
  };
  add("session_id", [](HiddenFrame& f) { f.session_id ^= 1; });
  add("step", [](HiddenFrame& f) { f.step ^= 1; });
  add("first_position", [](HiddenFrame& f) { f.first_position ^= 1; });
  add("resume_layer", [](HiddenFrame& f) { f.resume_layer ^= 1; });
  const Frame good = MarshalHidden(base);
  for (const auto& [name, v] : variants) {
    std::vector<size_t> changed = Diff(good, MarshalHidden(v));
    ASSERT_FALSE(changed.empty()) << name;
    Frame bad = good;
    bad[changed.front()] ^= 0x01;  // the field itself; the digest is untouched
    Status st = DecodeStatus(bad);
    EXPECT_EQ(st.kind(), ErrorKind::kCorrupt) << name << ": " << st.ToString();
    EXPECT_NE(st.message().find("digest mismatch"), std::string::npos) << name;
  }
}

TEST(HiddenFrameMalformedTest, EverySingleBitFlipIsRejectedOrMeaningless) {
  // Canonical form pins every word; the only bits left are the padding
  // inside struct data sections (Envelope: 16 after the union tag;
  // HiddenFrame: 32 after resumeLayer), which no field reads, and the 30
  // offset bits of the empty layer-digest blob's pointer (an empty list
  // points at nothing; Cap'n Proto's canonical check does not pin them).
  // A flip there must decode to exactly the original frame; every other
  // flip must fail.
  const HiddenFrame in = MakeHidden(1, kWidth, 4);
  const Frame good = MarshalHidden(in);
  int unnoticed = 0;
  for (size_t bit = 0; bit < good.size() * 8; ++bit) {
    Frame bad = good;
    bad[bit / 8] ^= static_cast<uint8_t>(1u << (bit % 8));
    Result<HiddenFrame> out = UnmarshalHidden(bad);
    if (out.ok()) {
      ++unnoticed;
      ASSERT_EQ(MarshalHidden(*out), good) << "bit " << bit << " changed the frame";
      continue;
    }
    ASSERT_TRUE(out.status().kind() == ErrorKind::kCorrupt ||
                out.status().kind() == ErrorKind::kInvalid)
        << "bit " << bit << ": " << out.status().ToString();
  }
  EXPECT_LE(unnoticed, 48 + 30);
}

TEST(HiddenFrameMalformedTest, NonCanonicalEncodingIsCorrupt) {
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<schema::Envelope>();
  root.setVersion(kProtocolVersion);
  auto h = root.initHidden();
  h.setSeq(1);
  h.setHidden(1);
  h.initPayload(4);
  h.initDigest(32);  // resumeLayer stays 0: the builder keeps a zero word
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(flat.begin()),
                                 flat.size() * 8);
  Status st = DecodeStatus(bytes);
  EXPECT_EQ(st.kind(), ErrorKind::kCorrupt);
  EXPECT_NE(st.message().find("canonical"), std::string::npos) << st.ToString();
}

TEST(HiddenFrameMalformedTest, MultiSegmentHeaderIsCorrupt) {
  Frame frame = MarshalHidden(MakeHidden(1, 4, 1));
  frame[0] = 1;
  EXPECT_EQ(DecodeStatus(frame).kind(), ErrorKind::kCorrupt);
}

TEST(HiddenFrameMalformedTest, OtherMessageTypeIsInvalid) {
  Frame frame = MarshalMessage(Heartbeat{1, "w0"});
  Status st = DecodeStatus(frame);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(st.message(), "expected a hidden frame, got heartbeat");
}

TEST(HiddenFrameMalformedTest, GarbageIsRejected) {
  std::mt19937_64 rng(1234);
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> junk(rng() % 512);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    if (junk.size() >= 8 && i % 2 == 0) {
      // Make the header plausible so the capnp layer is exercised too.
      const uint32_t words = static_cast<uint32_t>((junk.size() - 8) / 8);
      junk.resize(8 + words * 8);
      std::memset(junk.data(), 0, 4);
      std::memcpy(junk.data() + 4, &words, 4);
    }
    Status st = DecodeStatus(junk);
    ASSERT_FALSE(st.ok()) << "garbage #" << i << " decoded";
    ASSERT_TRUE(st.kind() == ErrorKind::kCorrupt || st.kind() == ErrorKind::kInvalid)
        << st.ToString();
  }
}

TEST(HiddenFrameMalformedTest, AllZeroFrameIsRejected) {
  std::vector<uint8_t> zeros(16, 0);
  zeros[4] = 1;  // one word: a null root pointer
  EXPECT_FALSE(DecodeStatus(zeros).ok());
}

}  // namespace
}  // namespace lockstep::wire
