// T1: every (layer, position, kv head, lane) of K, Kraw and V lands in the
// slot the KvCache layout documents, after a real forward pass — checked
// against an independent forward (reference.h) and an independent §7.4
// rotation; layers do not alias; a stage's cache of [lo, hi) equals the
// matching slice of the whole-model cache.
#include <gtest/gtest.h>

#include "engine/ops/kernels.h"
#include "kv_test_util.h"
#include "reference.h"
#include "tests/fixture_absent.h"

namespace lockstep::kvtest {
namespace {

class LayoutTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    m_ = GetModel(GetParam());
    if (m_ == nullptr) LOCKSTEP_FIXTURE_ABSENT() << GetParam() << " is absent";
  }
  size_t head_dim() const { return static_cast<size_t>(m_->open.config.head_dim); }
  const TestModel* m_ = nullptr;
};

TEST_P(LayoutTest, PrefillSlotsMatchAnIndependentForward) {
  const std::vector<uint32_t> toks = Tokens(*m_, 7, 1);
  LocalBackend b(*m_->stage);
  std::vector<float> logits;
  ASSERT_TRUE(b.Feed(toks, &logits).ok());
  RefModel ref(m_->open.config, m_->weights);
  RefCache rc = ref.Empty();
  const auto want = ref.Run(rc, toks, 0, ref.NoWindows());
  EXPECT_EQ(CompareWithRef(rc, b.cache(), head_dim()), "");
  EXPECT_TRUE(SameBits(logits, want.back()));
}

TEST_P(LayoutTest, DecodeSlotsMatchAnIndependentForward) {
  const std::vector<uint32_t> toks = Tokens(*m_, 6, 2);
  LocalBackend b(*m_->stage);
  RefModel ref(m_->open.config, m_->weights);
  RefCache rc = ref.Empty();
  std::vector<float> logits;
  for (size_t t = 0; t < toks.size(); ++t) {
    ASSERT_TRUE(b.Feed(std::span(&toks[t], 1), &logits).ok());
    const auto want = ref.Step(rc, toks[t], static_cast<int64_t>(t), ref.NoWindows());
    ASSERT_TRUE(SameBits(logits, want)) << "step " << t;
    ASSERT_EQ(CompareWithRef(rc, b.cache(), head_dim()), "") << "step " << t;
  }
}

// K == RoPE(Kraw, positions[e]) for every entry, with the rotation
// computed independently; and Kraw itself is not already rotated (K and
// Kraw differ for every entry past position 0).
TEST_P(LayoutTest, KIsOneRotationOfKrawAtTheStoredPosition) {
  LocalBackend b(*m_->stage);
  std::vector<float> logits;
  ASSERT_TRUE(b.Feed(Tokens(*m_, 9, 3), &logits).ok());
  const KvCache& c = b.cache();
  std::vector<float> row(c.kv_width());
  for (int l = 0; l < m_->layers(); ++l)
    for (size_t e = 0; e < c.size(); ++e) {
      const float* kraw = c.kraw_data(l) + e * c.kv_width();
      RopeRow(kraw, row.data(), c.kv_width(), head_dim(), c.positions()[e],
              m_->stage->inv_freq());
      ASSERT_TRUE(SameBits(row, KRow(c, l, e))) << "layer " << l << " entry " << e;
      if (e > 0) {
    EXPECT_FALSE(SameBits(std::span(kraw, c.kv_width()), row)) << "entry " << e;
  }
    }
}

TEST_P(LayoutTest, LayersAndTensorsDoNotAlias) {
  LocalBackend b(*m_->stage);
  std::vector<float> logits;
  ASSERT_TRUE(b.Feed(Tokens(*m_, 5, 4), &logits).ok());
  const KvCache& c = b.cache();
  const size_t bytes = c.size() * c.kv_width() * sizeof(float);
  const size_t heads = c.kv_width() / head_dim();
  const size_t head_bytes = c.tiles() * ops::kKvTile * head_dim() * sizeof(float);
  std::vector<std::pair<const char*, const char*>> ranges;
  auto add = [&](const float* p, size_t n) {
    const char* s = reinterpret_cast<const char*>(p);
    ranges.emplace_back(s, s + n);
  };
  for (int l = 0; l < m_->layers(); ++l) {
    add(c.kraw_data(l), bytes);
    for (size_t h = 0; h < heads; ++h) {
      add(c.k_tiles(l, h), head_bytes);
      add(c.v_rows(l, h), head_bytes);
    }
  }
  for (size_t i = 0; i < ranges.size(); ++i)
    for (size_t j = i + 1; j < ranges.size(); ++j) {
      const bool overlap = ranges[i].first < ranges[j].second && ranges[j].first < ranges[i].second;
      EXPECT_FALSE(overlap) << "tensor ranges " << i << " and " << j << " overlap";
    }
  // Non-vacuous: each layer holds its own values.
  for (int l = 1; l < m_->layers(); ++l) {
    EXPECT_FALSE(SameBits(KRows(c, 0), KRows(c, l)));
    EXPECT_FALSE(SameBits(VRows(c, 0), VRows(c, l)));
  }
}

// Runs `toks` (prefill, then one decode token) through the stages in
// order; returns the last logits.
std::vector<float> RunPipeline(const std::vector<std::unique_ptr<Stage>>& stages,
                               std::vector<KvCache>& caches, std::span<const uint32_t> toks,
                               int64_t first_pos) {
  std::vector<float> hidden;
  ForwardScratch scratch;
  EXPECT_TRUE(stages.front()->Embed(toks, &hidden).ok());
  for (size_t s = 0; s < stages.size(); ++s) {
    EXPECT_TRUE(stages[s]->Forward(hidden, first_pos, caches[s], scratch).ok());
  }
  const Stage& last = *stages.back();
  std::vector<float> logits(last.vocab());
  last.Logits(std::span(hidden).subspan(hidden.size() - last.hidden()), logits, scratch);
  return logits;
}

TEST_P(LayoutTest, StageSliceCacheEqualsWholeModelSlice) {
  const std::vector<uint32_t> prompt = Tokens(*m_, 6, 5);
  LocalBackend whole(*m_->stage);
  std::vector<float> whole_logits;
  ASSERT_TRUE(whole.Feed(prompt, &whole_logits).ok());
  const uint32_t next[1] = {ops::ArgmaxFirst(whole_logits.data(), whole_logits.size())};
  ASSERT_TRUE(whole.Feed(next, &whole_logits).ok());
  // Every two-way split, plus one stage per layer.
  std::vector<std::vector<int>> splits;
  for (int cut = 1; cut < m_->layers(); ++cut) splits.push_back({0, cut, m_->layers()});
  std::vector<int> each;
  for (int l = 0; l <= m_->layers(); ++l) each.push_back(l);
  splits.push_back(each);
  for (const auto& cuts : splits) {
    std::vector<std::unique_ptr<Stage>> stages;
    std::vector<KvCache> caches;
    for (size_t s = 0; s + 1 < cuts.size(); ++s) {
      stages.push_back(LoadSlice(*m_, cuts[s], cuts[s + 1]));
      ASSERT_NE(stages.back(), nullptr);
      caches.push_back(stages.back()->NewCache());
    }
    RunPipeline(stages, caches, prompt, 0);
    const auto logits = RunPipeline(stages, caches, next, static_cast<int64_t>(prompt.size()));
    EXPECT_TRUE(SameBits(logits, whole_logits)) << cuts.size() - 1 << " stages";
    for (const KvCache& c : caches) {
      EXPECT_EQ(DescribeDiff(c, whole.cache(), c.lo(), c.hi()), "")
          << "slice [" << c.lo() << ", " << c.hi() << ")";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, LayoutTest, ::testing::ValuesIn(AllModelNames()),
                         [](const auto& info) { return TestName(info.param); });

}  // namespace
}  // namespace lockstep::kvtest
