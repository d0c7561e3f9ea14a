// Sha256State: a SHA-256 stream exported between any two bytes and resumed
// elsewhere hashes exactly as one uninterrupted stream; the reference is
// the one-shot EVP digest (a separate OpenSSL path). Inconsistent states
// are refused, never resumed.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "base/sha256.h"
#include "engine/witness.h"

namespace lockstep {
namespace {

std::vector<uint8_t> Message(size_t n) {
  std::vector<uint8_t> m(n);
  uint32_t x = 0x9e3779b9u;
  for (uint8_t& b : m) {
    x = x * 1664525u + 1013904223u;
    b = static_cast<uint8_t>(x >> 24);
  }
  return m;
}

TEST(Sha256StateTest, SplitAtEveryOffsetEqualsOneShot) {
  const std::vector<uint8_t> msg = Message(200);
  // The message varies (a constant would hide a wrong block order).
  EXPECT_NE(msg[0], msg[1]);
  for (size_t total : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{65}, size_t{200}}) {
    const std::span<const uint8_t> all(msg.data(), total);
    const Digest want = Sha256(all);
    for (size_t cut = 0; cut <= total; ++cut) {
      Sha256Stream first;
      first.Update(all.subspan(0, cut));
      const Sha256State state = first.Export();
      Result<Sha256Stream> second = Sha256Stream::Import(state);
      ASSERT_TRUE(second.ok()) << second.status().ToString();
      second->Update(all.subspan(cut));
      EXPECT_EQ(second->Finalize(), want) << "total " << total << " cut " << cut;
      // The exporter is unchanged by exporting.
      first.Update(all.subspan(cut));
      EXPECT_EQ(first.Finalize(), want) << "total " << total << " cut " << cut;
    }
  }
}

TEST(Sha256StateTest, LayoutIsDocumented) {
  Sha256Stream s;
  const std::vector<uint8_t> msg = Message(70);
  s.Update(msg);
  const Sha256State st = s.Export();
  // [32,40): bits hashed, u64 LE; [40,104): 6 pending bytes then zeros;
  // [104,108): num = 6.
  EXPECT_EQ(st.bytes[32], static_cast<uint8_t>(70 * 8 & 0xff));
  EXPECT_EQ(st.bytes[33], static_cast<uint8_t>(70 * 8 >> 8));
  EXPECT_EQ(std::memcmp(st.bytes.data() + 40, msg.data() + 64, 6), 0);
  for (size_t i = 46; i < 104; ++i) EXPECT_EQ(st.bytes[i], 0) << i;
  EXPECT_EQ(st.bytes[104], 6);
  // A fresh stream's chaining value is SHA-256's initial value (FIPS 180-4).
  const Sha256State fresh = Sha256Stream().Export();
  EXPECT_EQ(fresh.bytes[0], 0x67);  // h0 = 0x6a09e667, little-endian
  EXPECT_EQ(fresh.bytes[3], 0x6a);
}

TEST(Sha256StateTest, JunkStatesAreRefused) {
  Sha256Stream s;
  s.Update(Message(70));
  const Sha256State good = s.Export();
  ASSERT_TRUE(Sha256State::Parse(good.bytes).ok());

  auto refused = [](Sha256State st, const char* what) {
    Result<Sha256Stream> r = Sha256Stream::Import(st);
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_EQ(r.status().kind(), ErrorKind::kCorrupt) << what;
    EXPECT_FALSE(Sha256State::Parse(st.bytes).ok()) << what;
  };
  Sha256State num_too_big = good;
  num_too_big.bytes[104] = 64;
  refused(num_too_big, "num 64");
  Sha256State num_disagrees = good;
  num_disagrees.bytes[104] = 7;
  num_disagrees.bytes[46] = 1;  // keep the block consistent with num 7
  refused(num_disagrees, "num 7 for 70 bytes");
  Sha256State odd_bits = good;
  odd_bits.bytes[32] ^= 1;
  refused(odd_bits, "a bit count that is not whole bytes");
  Sha256State tail = good;
  tail.bytes[103] = 1;
  refused(tail, "data past the pending bytes");
  Sha256State all_ones;
  all_ones.bytes.fill(0xff);
  refused(all_ones, "all ones");

  const std::vector<uint8_t> shorter(good.bytes.begin(), good.bytes.end() - 1);
  Result<Sha256State> cut = Sha256State::Parse(shorter);
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("107 bytes"), std::string::npos)
      << cut.status().message();
}

TEST(Sha256StateTest, ResumedWitnessChainEqualsOneChain) {
  WitnessSeed seed;
  seed.weights_sha256 = Sha256("w");
  const std::vector<uint32_t> prompt = {3, 1, 4, 1, 5};
  const std::vector<float> logits = {0.5f, -1.25f, 3.0f, -0.0f, 1e-40f};
  WitnessChain whole(seed, prompt);
  WitnessChain moved(seed, prompt);
  for (uint32_t step = 0; step < 5; ++step) {
    whole.AddStep(logits, step);
    Result<WitnessChain> resumed = WitnessChain::Resume(moved.Export());
    ASSERT_TRUE(resumed.ok());
    resumed->AddStep(logits, step);
    moved = std::move(*resumed);
  }
  EXPECT_EQ(moved.Finalize(), whole.Finalize());
}

}  // namespace
}  // namespace lockstep
