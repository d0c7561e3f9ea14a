// T3 (window): a query at position p sees exactly the entries whose
// stored position is in [p - W + 1, p]; the bound follows the stored
// positions, not indices; windowed attention equals an independent
// reference that scores every entry and masks with -inf before the §9.3
// softmax; no window (or W >= length) is plain causal attention, bit for
// bit; a real window changes the output.
#include <gtest/gtest.h>

#include "engine/ops/kernels.h"
#include "engine/ops/rope.h"
#include "kv_test_util.h"
#include "reference.h"
#include "tests/fixture_absent.h"

namespace lockstep::kvtest {
namespace {

// Positions given as runs {first, count}.
KvCache CacheWithPositions(std::initializer_list<std::pair<int64_t, size_t>> runs) {
  KvCache c(0, 2, 4, 1, ops::InvFreq(10000.0f, 4));
  for (auto [first, n] : runs) c.Append(n, first);
  return c;
}

TEST(WindowBoundary, FirstVisibleTable) {
  struct Row {
    bool gapped;  // positions [0,1,2,7,8] instead of [0..9]
    int w;
    int64_t p;
    size_t end, want;
  };
  const Row rows[] = {
      {false, 3, 9, 10, 7},    // [p-W+1, p] = [7, 9]
      {false, 1, 9, 10, 9},    // W = 1: itself only
      {false, 10, 9, 10, 0},   // W = length: everything
      {false, 11, 9, 10, 0},   // W > length
      {false, 1000, 9, 10, 0},
      {false, 0, 9, 10, 0},    // no window
      {false, 3, 4, 5, 2},     // a prefill row in the middle: [2, 4]
      {false, 1, 0, 1, 0},
      {false, 2, 1, 2, 0},
      {true, 3, 8, 5, 3},      // bound 6: positions 7, 8 -> first index 3
      {true, 2, 8, 5, 3},      // bound 7
      {true, 1, 8, 5, 4},      // bound 8: itself
      {true, 6, 8, 5, 3},      // bound 3: nothing between 3 and 6
      {true, 7, 8, 5, 2},      // bound 2
      {true, 9, 8, 5, 0},      // bound 0
      {true, 1, 7, 4, 3},      // the row at position 7 (index 3)
      {true, 3, 2, 3, 0},
  };
  for (const Row& r : rows) {
    KvCache c = r.gapped ? CacheWithPositions({{0, 3}, {7, 2}}) : CacheWithPositions({{0, 10}});
    ASSERT_TRUE(c.SetWindow(1, r.w).ok());
    EXPECT_EQ(c.FirstVisible(1, r.p, r.end), r.want)
        << (r.gapped ? "gapped" : "dense") << " W=" << r.w << " p=" << r.p;
    EXPECT_EQ(c.FirstVisible(0, r.p, r.end), 0u) << "layer 0 has no window";
  }
}

TEST(WindowBoundary, BadWindowsAreInvalid) {
  KvCache c = CacheWithPositions({{0, 4}});
  ASSERT_TRUE(c.SetWindow(0, 2).ok());
  const KvCache before = c.Clone();
  EXPECT_EQ(c.SetWindow(0, -1).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(c.SetWindow(2, 3).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(c.SetWindow(-1, 3).kind(), ErrorKind::kInvalid);
  EXPECT_TRUE(c.BitEqual(before));
  EXPECT_EQ(c.window(0), 2);
}

class WindowTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    m_ = GetModel(GetParam());
    if (m_ == nullptr) LOCKSTEP_FIXTURE_ABSENT() << GetParam() << " is absent";
    ref_ = std::make_unique<RefModel>(m_->open.config, m_->weights);
  }
  size_t hd() const { return static_cast<size_t>(m_->open.config.head_dim); }
  const TestModel* m_ = nullptr;
  std::unique_ptr<RefModel> ref_;
};

// Prefill (one chunk or two), then greedy decode, each logits row and the
// cache compared with the masked reference.
void ExpectMatchesReference(const TestModel& m, const RefModel& ref, int window,
                            size_t first_chunk) {
  SCOPED_TRACE("W=" + std::to_string(window) + " first chunk " + std::to_string(first_chunk));
  const auto prompt = Tokens(m, 7, 20);
  LocalBackend b(*m.stage);
  ASSERT_TRUE(b.SetWindow(window).ok());
  RefCache rc = ref.Empty();
  const auto windows = ref.Windows(window);
  const auto want = ref.Run(rc, prompt, 0, windows);
  std::vector<float> logits;
  const std::span<const uint32_t> p(prompt);
  if (first_chunk > 0) {
    ASSERT_TRUE(b.Feed(p.first(first_chunk), &logits).ok());
    EXPECT_TRUE(SameBits(logits, want[first_chunk - 1]));
  }
  ASSERT_TRUE(b.Feed(p.subspan(first_chunk), &logits).ok());
  ASSERT_TRUE(SameBits(logits, want.back()));
  for (int s = 0; s < 6; ++s) {
    const uint32_t t = ops::ArgmaxFirst(logits.data(), logits.size());
    ASSERT_TRUE(b.Feed(std::span(&t, 1), &logits).ok());
    const auto w = ref.Step(rc, t, static_cast<int64_t>(prompt.size()) + s, windows);
    ASSERT_TRUE(SameBits(logits, w)) << "decode step " << s;
  }
  EXPECT_EQ(CompareWithRef(rc, b.cache(), static_cast<size_t>(m.open.config.head_dim)), "");
}

TEST_P(WindowTest, WindowedAttentionEqualsMaskedReference) {
  for (int w : {1, 2, 3, 5}) {
    for (size_t chunk : {size_t{0}, size_t{3}}) ExpectMatchesReference(*m_, *ref_, w, chunk);
  }
}

// No window, W == total length (13 entries by the end) and W far beyond it
// are all plain causal attention: the reference then masks nothing.
TEST_P(WindowTest, UnsetOrWideWindowIsPlainCausal) {
  for (int w : {0, 13, 1000}) {
    for (size_t chunk : {size_t{0}, size_t{1}, size_t{4}}) {
      SCOPED_TRACE("W=" + std::to_string(w));
      const auto prompt = Tokens(*m_, 7, 20);
      LocalBackend b(*m_->stage), plain(*m_->stage);
      ASSERT_TRUE(b.SetWindow(w).ok());
      RefCache rc = ref_->Empty();
      const auto want = ref_->Run(rc, prompt, 0, ref_->NoWindows());
      std::vector<float> logits, pl;
      const std::span<const uint32_t> p(prompt);
      if (chunk > 0) {
    ASSERT_TRUE(b.Feed(p.first(chunk), &logits).ok());
  }
      ASSERT_TRUE(b.Feed(p.subspan(chunk), &logits).ok());
      ASSERT_TRUE(plain.Feed(p, &pl).ok());
      EXPECT_TRUE(SameBits(logits, want.back()));
      EXPECT_TRUE(SameBits(logits, pl));
      const auto gb = Greedy(b, logits, 6), gp = Greedy(plain, pl, 6);
      for (size_t s = 0; s < gb.size(); ++s) EXPECT_TRUE(SameBits(gb[s], gp[s])) << s;
      EXPECT_EQ(DescribeDiff(b.cache(), plain.cache()), "");
    }
  }
  ExpectMatchesReference(*m_, *ref_, 0, 2);
}

TEST_P(WindowTest, ARealWindowChangesTheOutput) {
  const auto prompt = Tokens(*m_, 9, 21);
  LocalBackend windowed(*m_->stage), plain(*m_->stage);
  ASSERT_TRUE(windowed.SetWindow(3).ok());
  std::vector<float> lw, lp;
  ASSERT_TRUE(windowed.Feed(prompt, &lw).ok());
  ASSERT_TRUE(plain.Feed(prompt, &lp).ok());
  EXPECT_FALSE(SameBits(lw, lp));
  // Layer 0's K/V come from the token alone; deeper layers saw less.
  EXPECT_EQ(DescribeDiff(windowed.cache(), plain.cache(), 0, 1), "");
  EXPECT_NE(DescribeDiff(windowed.cache(), plain.cache(), 1, m_->layers()), "");
}

// Positions [0,1,2,7,8] (a forward pass may start past the next index):
// with W = 3 the query at 8 sees indices 3..4 — by stored position, where
// an index-keyed bound would have admitted index 2.
TEST_P(WindowTest, BoundFollowsStoredPositionsNotIndices) {
  const auto toks = Tokens(*m_, 5, 22);
  const int64_t pos[] = {0, 1, 2, 7, 8};
  for (int w : {3, 6}) {
    KvCache cache = m_->stage->NewCache();
    for (int l = 0; l < m_->layers(); ++l) ASSERT_TRUE(cache.SetWindow(l, w).ok());
    std::vector<float> hidden;
    ForwardScratch scratch;
    ASSERT_TRUE(m_->stage->Embed(std::span(toks).first(3), &hidden).ok());
    ASSERT_TRUE(m_->stage->Forward(hidden, 0, cache, scratch).ok());
    ASSERT_TRUE(m_->stage->Embed(std::span(toks).subspan(3), &hidden).ok());
    ASSERT_TRUE(m_->stage->Forward(hidden, 7, cache, scratch).ok());
    ASSERT_EQ(cache.FirstVisible(0, 8, 5), 3u);
    std::vector<float> logits(m_->stage->vocab());
    m_->stage->Logits(std::span(hidden).subspan(m_->stage->hidden()), logits, scratch);
    RefCache rc = ref_->Empty();
    std::vector<float> want;
    for (size_t t = 0; t < 5; ++t) want = ref_->Step(rc, toks[t], pos[t], ref_->Windows(w));
    EXPECT_TRUE(SameBits(logits, want)) << "W=" << w;
    EXPECT_EQ(CompareWithRef(rc, cache, hd()), "") << "W=" << w;
  }
}

// After evicting the newest span, later tokens land at the renumbered
// positions and the window counts from there, exactly as in a run that
// never saw the span. (Windows over moved survivors: evict_test.cc,
// MovedSurvivorTest, against the reference.)
TEST_P(WindowTest, WindowAfterEvictionEqualsNeverSaw) {
  const auto seq = Tokens(*m_, 10, 23);
  LocalBackend x(*m_->stage), never(*m_->stage);
  ASSERT_TRUE(x.SetWindow(3).ok());
  ASSERT_TRUE(never.SetWindow(3).ok());
  std::vector<float> lx, ln;
  ASSERT_TRUE(x.Feed(std::span(seq).first(5), &lx).ok());
  ASSERT_TRUE(x.Evict(2, 3).ok());
  ASSERT_TRUE(x.Feed(std::span(seq).subspan(5), &lx).ok());
  std::vector<uint32_t> live(seq);
  live.erase(live.begin() + 2, live.begin() + 5);
  ASSERT_TRUE(never.Feed(live, &ln).ok());
  EXPECT_TRUE(SameBits(lx, ln));
  EXPECT_TRUE(x.cache().BitEqual(never.cache())) << DescribeDiff(x.cache(), never.cache());
  RefCache rc = ref_->Empty();
  EXPECT_TRUE(SameBits(ln, ref_->Run(rc, live, 0, ref_->Windows(3)).back()));
  const auto gx = Greedy(x, lx, 4), gn = Greedy(never, ln, 4);
  for (size_t s = 0; s < gx.size(); ++s) EXPECT_TRUE(SameBits(gx[s], gn[s])) << s;
}

INSTANTIATE_TEST_SUITE_P(Models, WindowTest, ::testing::ValuesIn(AllModelNames()),
                         [](const auto& info) { return TestName(info.param); });

}  // namespace
}  // namespace lockstep::kvtest
