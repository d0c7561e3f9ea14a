// UpdateLanes against one-shot SHA-256 (OpenSSL's EVP path, which the lanes
// never use) and the FIPS 180-2 examples; the eight-lane kernel against
// OpenSSL's own block function, bit for bit.
#include "engine/io/sha256_lanes.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/random_bytes.h"

namespace lockstep {
namespace {

using testing::RandomBytes;

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

using Feed = void (*)(std::span<Sha256Stream* const>, std::span<const std::span<const uint8_t>>);

// UpdateLanes as a caller gets it, then its vector path forced where the
// kernel runs (on CPUs with the SHA extensions UpdateLanes never takes it).
class Sha256LanesFeed : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam() && !Sha256LanesKernelRuns()) {
      GTEST_SKIP() << "this CPU cannot run the AVX-512VL kernel";
    }
  }
  static Feed feed() { return GetParam() ? &UpdateLanesInKernel : &UpdateLanes; }
};

INSTANTIATE_TEST_SUITE_P(Paths, Sha256LanesFeed, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "InKernel" : "AsDispatched"; });

TEST_P(Sha256LanesFeed, FipsExamplesFedTogether) {
  const std::string abc = "abc";
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  const std::string million(1000000, 'a');
  const char* kMillion = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  {  // one long message in three lanes (compressed together), short ones beside
    Sha256Stream s[4];
    Sha256Stream* streams[4] = {&s[0], &s[1], &s[2], &s[3]};
    const std::span<const uint8_t> bytes[4] = {Bytes(million), Bytes(abc), Bytes(million),
                                               Bytes(million)};
    feed()(std::span<Sha256Stream* const>(streams),
           std::span<const std::span<const uint8_t>>(bytes));
    EXPECT_EQ(ToHex(s[0].Finalize()), kMillion);
    EXPECT_EQ(ToHex(s[1].Finalize()),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(ToHex(s[2].Finalize()), kMillion);
    EXPECT_EQ(ToHex(s[3].Finalize()), kMillion);
  }
  {  // two lanes, one of them empty
    Sha256Stream s[2];
    Sha256Stream* streams[2] = {&s[0], &s[1]};
    const std::span<const uint8_t> bytes[2] = {Bytes(two_blocks), {}};
    feed()(std::span<Sha256Stream* const>(streams),
           std::span<const std::span<const uint8_t>>(bytes));
    EXPECT_EQ(ToHex(s[0].Finalize()),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(ToHex(s[1].Finalize()),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  }
}

// Many calls of uneven sizes, lanes joining and leaving, partial blocks
// pending between calls: every digest as if each message were hashed alone.
TEST_P(Sha256LanesFeed, UnevenPiecesGiveEachMessagesOwnDigest) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const size_t lanes = 1 + trial % kSha256Lanes;
    std::vector<std::vector<uint8_t>> msg;
    std::vector<size_t> at(lanes, 0);
    std::vector<Sha256Stream> s(lanes);
    for (size_t l = 0; l < lanes; ++l) {
      msg.push_back(RandomBytes(rng() % 20000, static_cast<uint32_t>(100 * trial + l)));
    }
    for (;;) {
      std::vector<Sha256Stream*> streams;
      std::vector<std::span<const uint8_t>> pieces;
      for (size_t l = 0; l < lanes; ++l) {
        if (at[l] == msg[l].size() || rng() % 5 == 0) continue;  // this lane sits out
        const size_t take = std::min<size_t>(msg[l].size() - at[l], rng() % 3000);
        streams.push_back(&s[l]);
        pieces.push_back(std::span<const uint8_t>(msg[l]).subspan(at[l], take));
        at[l] += take;
      }
      feed()(streams, pieces);
      bool all = true;
      for (size_t l = 0; l < lanes; ++l) all = all && at[l] == msg[l].size();
      if (all) break;
    }
    for (size_t l = 0; l < lanes; ++l) {
      EXPECT_EQ(ToHex(s[l].Finalize()), ToHex(Sha256(msg[l]))) << "trial " << trial << " lane " << l;
    }
  }
}

TEST(Sha256LanesTest, KernelEqualsOpenSslBlockByBlock) {
  if (!Sha256LanesKernelRuns()) GTEST_SKIP() << "this CPU cannot run the AVX-512VL kernel";
  for (size_t n : {size_t{1}, size_t{2}, size_t{7}, size_t{64}}) {
    std::vector<std::vector<uint8_t>> data;
    uint32_t h[kSha256Lanes][8];
    const uint8_t* p[kSha256Lanes];
    std::vector<Sha256Stream> ref(kSha256Lanes);
    for (size_t l = 0; l < kSha256Lanes; ++l) {
      data.push_back(RandomBytes(64 * (n + 1), static_cast<uint32_t>(n * 10 + l)));
      // Start each lane from a different chaining value: one block in.
      ref[l].Update(std::span<const uint8_t>(data[l]).first(64));
      const Sha256State st = ref[l].Export();
      for (size_t i = 0; i < 8; ++i) {
        const uint8_t* q = st.bytes.data() + 4 * i;
        h[l][i] = uint32_t{q[0]} | uint32_t{q[1]} << 8 | uint32_t{q[2]} << 16 |
                  uint32_t{q[3]} << 24;
      }
      p[l] = data[l].data() + 64;
      ref[l].Update(std::span<const uint8_t>(data[l]).subspan(64));
    }
    Sha256BlocksX8(h, p, n);
    for (size_t l = 0; l < kSha256Lanes; ++l) {
      const Sha256State st = ref[l].Export();
      for (size_t i = 0; i < 8; ++i) {
        const uint8_t* q = st.bytes.data() + 4 * i;
        const uint32_t want = uint32_t{q[0]} | uint32_t{q[1]} << 8 | uint32_t{q[2]} << 16 |
                              uint32_t{q[3]} << 24;
        EXPECT_EQ(h[l][i], want) << "n " << n << " lane " << l << " word " << i;
      }
    }
  }
}

}  // namespace
}  // namespace lockstep
