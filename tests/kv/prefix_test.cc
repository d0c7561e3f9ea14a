// T3 (prefix reuse): SessionFromPrefix (clone + suffix prefill) equals a
// full recompute — last logits, argmax, an 8-token greedy continuation,
// cache length and contents — and a clone is independent of its source.
#include <gtest/gtest.h>

#include "engine/ops/kernels.h"
#include "engine/prefix.h"
#include "kv_test_util.h"
#include "tests/fixture_absent.h"

namespace lockstep::kvtest {
namespace {

class PrefixTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    m_ = GetModel(GetParam());
    if (m_ == nullptr) LOCKSTEP_FIXTURE_ABSENT() << GetParam() << " is absent";
  }
  const TestModel* m_ = nullptr;
};

std::vector<uint32_t> GreedyTokens(const std::vector<std::vector<float>>& rows) {
  std::vector<uint32_t> out;
  for (const auto& r : rows) out.push_back(ops::ArgmaxFirst(r.data(), r.size()));
  return out;
}

void ExpectReuseEqualsRecompute(const TestModel& m, int window, size_t prefix_len,
                                size_t suffix_len) {
  SCOPED_TRACE("W=" + std::to_string(window) + " prefix " + std::to_string(prefix_len) +
               " suffix " + std::to_string(suffix_len));
  const auto seq = Tokens(m, prefix_len + suffix_len, 30);
  const std::span<const uint32_t> all(seq);
  LocalBackend warm(*m.stage), full(*m.stage);
  ASSERT_TRUE(warm.SetWindow(window).ok());
  ASSERT_TRUE(full.SetWindow(window).ok());
  std::vector<float> lw, lr, lf;
  ASSERT_TRUE(warm.Feed(all.first(prefix_len), &lw).ok());
  const CacheSnapshot prefix_before = Snapshot(warm.cache());
  auto reuse = SessionFromPrefix(*m.stage, warm.cache(), all.subspan(prefix_len), &lr);
  ASSERT_TRUE(reuse.ok()) << reuse.status().ToString();
  ASSERT_TRUE(full.Feed(all, &lf).ok());
  EXPECT_TRUE(SameBits(lr, lf));
  EXPECT_EQ(ops::ArgmaxFirst(lr.data(), lr.size()), ops::ArgmaxFirst(lf.data(), lf.size()));
  EXPECT_EQ(reuse->CacheLength(), full.CacheLength());
  EXPECT_TRUE(reuse->cache().BitEqual(full.cache())) << DescribeDiff(reuse->cache(), full.cache());
  const auto gr = Greedy(*reuse, lr, 8), gf = Greedy(full, lf, 8);
  EXPECT_EQ(GreedyTokens(gr), GreedyTokens(gf));
  for (size_t s = 0; s < gr.size(); ++s) EXPECT_TRUE(SameBits(gr[s], gf[s])) << "step " << s;
  EXPECT_EQ(reuse->CacheLength(), prefix_len + suffix_len + 8);
  EXPECT_TRUE(reuse->cache().BitEqual(full.cache()));
  EXPECT_TRUE(SameSnapshot(Snapshot(warm.cache()), prefix_before)) << "the prefix was modified";
}

TEST_P(PrefixTest, SessionFromPrefixEqualsFullRecompute) {
  ExpectReuseEqualsRecompute(*m_, 0, 5, 3);
  ExpectReuseEqualsRecompute(*m_, 0, 6, 1);
  ExpectReuseEqualsRecompute(*m_, 0, 1, 6);
  ExpectReuseEqualsRecompute(*m_, 2, 5, 3);  // the prefix carries its windows
}

TEST_P(PrefixTest, OnePrefixSeedsManySessions) {
  const auto prefix = Tokens(*m_, 4, 31);
  LocalBackend warm(*m_->stage);
  std::vector<float> logits;
  ASSERT_TRUE(warm.Feed(prefix, &logits).ok());
  for (uint32_t seed = 0; seed < 3; ++seed) {
    const auto suffix = Tokens(*m_, 2 + seed, 40 + seed);
    std::vector<float> lr, lf;
    auto reuse = SessionFromPrefix(*m_->stage, warm.cache(), suffix, &lr);
    ASSERT_TRUE(reuse.ok());
    std::vector<uint32_t> whole(prefix);
    whole.insert(whole.end(), suffix.begin(), suffix.end());
    LocalBackend full(*m_->stage);
    ASSERT_TRUE(full.Feed(whole, &lf).ok());
    EXPECT_TRUE(SameBits(lr, lf)) << "suffix " << seed;
  }
}

TEST_P(PrefixTest, CloneIsIndependent) {
  LocalBackend b(*m_->stage);
  std::vector<float> logits;
  ASSERT_TRUE(b.Feed(Tokens(*m_, 6, 32), &logits).ok());
  const CacheSnapshot original = Snapshot(b.cache());
  KvCache clone = b.cache().Clone();
  EXPECT_TRUE(clone.BitEqual(b.cache()));
  EXPECT_TRUE(SameSnapshot(Snapshot(clone), original));
  for (int l = 0; l < m_->layers(); ++l) {
    EXPECT_NE(clone.k_tiles(l, 0), b.cache().k_tiles(l, 0));
    EXPECT_NE(clone.kraw_data(l), b.cache().kraw_data(l));
    EXPECT_NE(clone.v_rows(l, 0), b.cache().v_rows(l, 0));
  }
  // Mutate the clone every way the API allows; the original must not move.
  std::vector<float> row = KRow(clone, 0, 1);
  row[0] = 1234.5f;
  clone.SetK(0, 1, row.data());
  clone.kraw_row(m_->layers() - 1, 2)[1] = -7.0f;
  clone.GetV(0, 0, row.data());
  row[2] = 3.0f;
  clone.SetV(0, 0, row.data());
  ASSERT_TRUE(clone.SetWindow(0, 2).ok());
  ASSERT_TRUE(clone.Evict(1, 2).ok());
  LocalBackend resumed(*m_->stage, std::move(clone));
  ASSERT_TRUE(resumed.Feed(Tokens(*m_, 3, 33), &logits).ok());
  EXPECT_TRUE(SameSnapshot(Snapshot(b.cache()), original));
  // And the other way round.
  KvCache second = b.cache().Clone();
  const CacheSnapshot second_before = Snapshot(second);
  ASSERT_TRUE(b.Evict(0, 1).ok());
  ASSERT_TRUE(b.Feed(Tokens(*m_, 2, 34), &logits).ok());
  EXPECT_TRUE(SameSnapshot(Snapshot(second), second_before));
}

INSTANTIATE_TEST_SUITE_P(Models, PrefixTest, ::testing::ValuesIn(AllModelNames()),
                         [](const auto& info) { return TestName(info.param); });

TEST(PrefixErrors, BadPrefixesAndSuffixesAreInvalid) {
  const TestModel* m = GetModel("syn-g3-bias");
  ASSERT_NE(m, nullptr);
  LocalBackend warm(*m->stage);
  std::vector<float> logits;
  ASSERT_TRUE(warm.Feed(Tokens(*m, 4, 35), &logits).ok());
  const CacheSnapshot before = Snapshot(warm.cache());
  auto empty = SessionFromPrefix(*m->stage, warm.cache(), {}, &logits);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(empty.status().message().find("suffix has no tokens"), std::string::npos);
  const uint32_t oov[1] = {m->vocab()};
  auto bad_token = SessionFromPrefix(*m->stage, warm.cache(), oov, &logits);
  ASSERT_FALSE(bad_token.ok());
  EXPECT_EQ(bad_token.status().kind(), ErrorKind::kInvalid);
  EXPECT_TRUE(SameSnapshot(Snapshot(warm.cache()), before));
  // A prefix built by another stage's slice of layers.
  auto slice = LoadSlice(*m, 0, 1);
  ASSERT_NE(slice, nullptr);
  const uint32_t one[1] = {1};
  auto wrong_layers = SessionFromPrefix(*m->stage, slice->NewCache(), one, &logits);
  ASSERT_FALSE(wrong_layers.ok());
  EXPECT_NE(wrong_layers.status().message().find("holds layers [0, 1)"), std::string::npos)
      << wrong_layers.status().message();
  // A prefix whose positions are not the session numbering 0..n-1.
  KvCache gapped = m->stage->NewCache();
  std::vector<float> hidden;
  ASSERT_TRUE(m->stage->Embed(one, &hidden).ok());
  ForwardScratch scratch;
  ASSERT_TRUE(m->stage->Forward(hidden, 5, gapped, scratch).ok());
  auto wrong_pos = SessionFromPrefix(*m->stage, gapped, one, &logits);
  ASSERT_FALSE(wrong_pos.ok());
  EXPECT_EQ(wrong_pos.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(wrong_pos.status().message().find("entry 0 has position 5"), std::string::npos)
      << wrong_pos.status().message();
}

}  // namespace
}  // namespace lockstep::kvtest
