// Multi-row steps equal single steps, bit for bit: N tokens through one
// Stage::Forward + LogitsBatch give, row by row, the logits of the same N
// tokens fed one at a time, and the same KV cache — on every ISA this CPU
// has, 1 and 2 threads, with sliding windows and an eviction before the
// rows, on dense, biased, Qwen3 (q/k norm) and MoE models. Then
// LocalBackend::FeedRows' contract (engine/row_step.h): rows kept up to
// the first differing step, the rest evicted as if never fed.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "engine/io/synthetic_model.h"
#include "engine/local_backend.h"
#include "engine/row_step.h"
#include "model_fixture.h"
#include "tests/fixture_absent.h"

namespace lockstep::testing {
namespace {

// Every ISA, 1 and 2 threads, bf16-resident weights (plus scalar f32).
std::vector<Variant> RowVariants() {
  std::vector<Variant> out = {{"scalar", 1, WeightFormat::kF32Rows}};
  for (const std::string& isa : ops::AvailableIsas()) {
    for (size_t t : {1, 2}) out.push_back({isa, t, WeightFormat::kPackedBf16});
  }
  return out;
}

// Tokens 0..vocab-1 in a fixed scramble, `n` of them from `start`.
std::vector<uint32_t> Tokens(size_t n, uint32_t start, uint32_t vocab) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < n; ++i) out.push_back(static_cast<uint32_t>((start + 37 * i * i + 11 * i) % vocab));
  return out;
}

struct Setup {
  int window = 0;                    // every layer's (0: none)
  std::optional<EvictSpec> evict;    // applied after the prefix
};

// The prefix fed in one pass (multi) or token by token, then the eviction.
void Prefix(const Stage& st, KvCache& cache, ForwardScratch& s, const Setup& setup, bool multi) {
  const std::vector<uint32_t> prefix = Tokens(13, 5, static_cast<uint32_t>(st.vocab()));
  for (int l = cache.lo(); l < cache.hi(); ++l) {
    ASSERT_TRUE(cache.SetWindow(l, setup.window).ok());
  }
  std::vector<float> hidden;
  for (size_t at = 0; at < prefix.size(); at += multi ? prefix.size() : 1) {
    const size_t n = multi ? prefix.size() : 1;
    ASSERT_TRUE(st.Embed(std::span(prefix).subspan(at, n), &hidden).ok());
    ASSERT_TRUE(st.Forward(hidden, static_cast<int64_t>(cache.size()), cache, s).ok());
  }
  if (setup.evict) {
    ASSERT_TRUE(cache.Evict(setup.evict->from, setup.evict->count).ok());
  }
}

// N rows in one pass == N single rows: every row's logits and the caches.
void ExpectRowsEqualSteps(const Stage& st, const Setup& setup, size_t n) {
  const size_t vocab = st.vocab();
  KvCache multi = st.NewCache(), single = st.NewCache();
  ForwardScratch sm = st.NewScratch(1, 1), ss = st.NewScratch(1, 1);
  Prefix(st, multi, sm, setup, true);
  Prefix(st, single, ss, setup, false);
  ASSERT_TRUE(multi.BitEqual(single)) << "prefix";
  const std::vector<uint32_t> rows = Tokens(n, 101, static_cast<uint32_t>(vocab));
  std::vector<float> hidden, all(n * vocab), one(vocab);
  ASSERT_TRUE(st.Embed(rows, &hidden).ok());
  ASSERT_TRUE(st.Forward(hidden, static_cast<int64_t>(multi.size()), multi, sm).ok());
  st.LogitsBatch(hidden, all, sm);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_TRUE(st.Embed(std::span(rows).subspan(i, 1), &hidden).ok());
    ASSERT_TRUE(st.Step(hidden, static_cast<int64_t>(single.size()), single, ss, one).ok());
    ASSERT_EQ(std::memcmp(one.data(), all.data() + i * vocab, vocab * 4), 0) << "row " << i;
  }
  EXPECT_TRUE(multi.BitEqual(single)) << "cache after the rows";
}

void ExpectRowsEqualStepsEverywhere(const std::string& dir) {
  auto model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<Setup> setups = {{}, {4, std::nullopt}, {0, EvictSpec{2, 3, 0}},
                                     {5, EvictSpec{0, 4, 0}}};
  for (const Variant& v : RowVariants()) {
    Loaded l = Load(*model, v);
    for (size_t k = 0; k < setups.size(); ++k) {
      SCOPED_TRACE(v.Name() + " setup " + std::to_string(k));
      for (size_t n : {2, 7, 40}) ExpectRowsEqualSteps(*l.stage, setups[k], n);
    }
  }
}

TEST(RowStep, RowsEqualStepsOnASyntheticModel) {
  const std::string dir = FreshPath("row_step_synth");
  SyntheticShape s = SmallUntiedShape();
  s.bias = true;
  ASSERT_TRUE(WriteSyntheticModel(dir, s, 7, "").ok());
  ExpectRowsEqualStepsEverywhere(dir);
}

TEST(RowStep, RowsEqualStepsOnTheConformanceModels) {
  for (const char* name : {"tiny-llama", "tiny-qwen", "tiny-qwen3", "tiny-qwen3-moe"}) {
    const std::string dir = ConformanceDir(name);
    if (!std::filesystem::exists(dir)) LOCKSTEP_FIXTURE_ABSENT() << dir << " is absent";
    SCOPED_TRACE(name);
    ExpectRowsEqualStepsEverywhere(dir);
  }
}

// FeedRows of the prompt and four proposals, of which the model chooses
// the first two but not the third: three steps come back, each equal to
// the step fed alone, and the backend is then the one that was fed the
// prompt and the two kept tokens alone (cache bit-equal, chain equal).
TEST(RowStep, FeedRowsKeepsRowsUpToTheFirstDifferenceAndEvictsTheRest) {
  const std::string dir = FreshPath("row_step_accept");
  ASSERT_TRUE(WriteSyntheticModel(dir, SmallUntiedShape(), 3, "").ok());
  auto model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok());
  for (const Variant& v : RowVariants()) {
    SCOPED_TRACE(v.Name());
    Loaded l = Load(*model, v);
    const std::vector<uint32_t> prompt = {4, 8, 15, 16, 23, 42};
    WitnessChain ca(model->Seed(), prompt), cb(model->Seed(), prompt);
    std::vector<float> logits;
    SamplingScratch scratch;
    LocalBackend a(*l.stage), b(*l.stage);
    StepContext xa{0, {}, &ca, &scratch, &logits}, xb{0, {}, &cb, &scratch, &logits};
    std::vector<StepOutcome> want;  // steps 0..2 fed alone: the prompt, then each chosen token
    std::vector<uint32_t> feed = prompt;
    for (uint32_t step = 0; step < 3; ++step) {
      xb.step = step;
      auto o = b.FeedAndChoose(feed, xb);
      ASSERT_TRUE(o.ok());
      want.push_back(*o);
      feed = {o->token};
    }
    // Proposals: the two the model chooses, then one it does not, then any.
    feed = prompt;
    feed.insert(feed.end(), {want[0].token, want[1].token, (want[2].token + 1) % 301, 9});
    RowSteps out;
    ASSERT_TRUE(a.FeedRows(feed, 5, xa, &out).ok());
    ASSERT_EQ(out.steps.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(out.steps[i].token, want[i].token) << i;
      EXPECT_EQ(out.steps[i].logits_sha256, want[i].logits_sha256) << i;
    }
    EXPECT_TRUE(a.cache().BitEqual(b.cache()));
    EXPECT_EQ(ca.Finalize(), cb.Finalize());
  }
}

TEST(RowStep, FeedRowsRefusesBadShapesAndIdsWithoutFeeding) {
  const std::string dir = FreshPath("row_step_refuse");
  ASSERT_TRUE(WriteSyntheticModel(dir, SmallUntiedShape(), 3, "").ok());
  auto model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok());
  Loaded l = Load(*model, Variant{});
  LocalBackend a(*l.stage);
  WitnessChain chain(model->Seed(), std::vector<uint32_t>{1});
  std::vector<float> logits;
  StepContext ctx{0, {}, &chain, nullptr, &logits};
  RowSteps out;
  EXPECT_EQ(a.FeedRows(std::vector<uint32_t>{1, 2}, 0, ctx, &out).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(a.FeedRows(std::vector<uint32_t>{1, 2}, 3, ctx, &out).kind(), ErrorKind::kInvalid);
  std::vector<uint32_t> long_feed(70, 1);
  long_feed[60] = 301;  // outside the vocabulary, in the third pass
  EXPECT_EQ(a.FeedRows(long_feed, 70, ctx, &out).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(a.CacheLength(), 0u);
}

}  // namespace
}  // namespace lockstep::testing
