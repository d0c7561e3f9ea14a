// Multi-row steps equal single steps, bit for bit: N tokens through one
// Stage::Forward + LogitsBatch give, row by row, the logits of the same N
// tokens fed one at a time, and the same KV cache — on every ISA this CPU
// has, 1 and 2 threads, with sliding windows and an eviction before the
// rows, on dense, biased, Qwen3 (q/k norm) and MoE models. Then
// LocalBackend::FeedRows' contract (engine/row_step.h): rows kept up to
// the first differing step, the rest evicted as if never fed; and
// ChooseRows' greedy rows, chosen all at once, equal one choice after
// another.
#include <gtest/gtest.h>

#include <algorithm>

#include <cstring>
#include <filesystem>
#include <limits>

#include "engine/io/synthetic_model.h"
#include "engine/local_backend.h"
#include "engine/ops/kernels.h"
#include "engine/row_step.h"
#include "engine/step_outcome.h"
#include "engine/witness.h"
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

// Passes cover an n-row step in order, none longer than kRowsPerPass, as
// few as that allows and differing in length by at most one row.
TEST(RowPasses, CutAStepIntoTheFewestEvenPasses) {
  for (size_t n = 1; n <= 5 * kRowsPerPass + 3; ++n) {
    std::vector<size_t> lengths;
    for (size_t at = 0; at < n; at = PassEnd(at, n)) {
      ASSERT_GT(PassEnd(at, n), at) << n;
      lengths.push_back(PassEnd(at, n) - at);
    }
    size_t total = 0;
    for (size_t len : lengths) total += len;
    ASSERT_EQ(total, n);
    ASSERT_EQ(lengths.size(), (n + kRowsPerPass - 1) / kRowsPerPass) << n;
    const auto [lo, hi] = std::minmax_element(lengths.begin(), lengths.end());
    ASSERT_LE(*hi, kRowsPerPass) << n;
    ASSERT_LE(*hi - *lo, 1u) << n;
  }
  EXPECT_EQ(PassEnd(0, 272), 55u);  // 55, 55, 54, 54, 54
  EXPECT_EQ(PassEnd(110, 272), 164u);
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
  long_feed[60] = 301;  // outside the vocabulary, in the second pass
  EXPECT_EQ(a.FeedRows(long_feed, 70, ctx, &out).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(a.CacheLength(), 0u);
}


// Rows of logits whose argmax needs the first-occurrence rule: ties, a
// NaN first or later, zeros of both signs; row i of m over `vocab` ids.
std::vector<float> TrickyRows(size_t m, size_t vocab) {
  std::vector<float> out(m * vocab);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>((i * 7919 + 13) % 97) / 8.0f - 6.0f;
  for (size_t r = 0; r < m; ++r) {
    float* row = out.data() + r * vocab;
    switch (r % 4) {
      case 0: row[vocab / 3] = row[vocab / 2] = 100.0f; break;  // a tie: the first wins
      case 1: row[0] = std::numeric_limits<float>::quiet_NaN(); break;
      case 2: row[5] = std::numeric_limits<float>::quiet_NaN(); row[vocab - 1] = 50.0f; break;
      default:
        for (size_t i = 0; i < vocab; ++i) row[i] = -1.0f;
        row[7] = -0.0f;
        row[9] = 0.0f;
    }
  }
  return out;
}

// ChooseRows chooses greedy rows all at once on a pool: each accepted row
// must still equal ChooseAndWitness on that row alone, in order, stopping
// after the first row whose token differs from the next one fed (or
// taking every row when nothing is compared), with the same chain.
TEST(RowStep, ChooseRowsEqualsOneChoiceAfterAnother) {
  constexpr size_t kRows = 9, kVocab = 301;
  const std::vector<float> logits = TrickyRows(kRows, kVocab);
  auto row = [&](size_t i) { return std::span<const float>(logits).subspan(i * kVocab, kVocab); };
  std::vector<uint32_t> argmax;  // the tokens chosen one row at a time
  for (size_t i = 0; i < kRows; ++i) argmax.push_back(ops::ArgmaxFirst(row(i).data(), kVocab));
  auto pool = ops::ThreadPool::Create(2);
  ASSERT_TRUE(pool.ok());
  const std::vector<uint32_t> prompt = {3, 1, 4};
  for (ops::ThreadPool* p : {static_cast<ops::ThreadPool*>(nullptr), pool->get()}) {
    for (size_t differ : {size_t{0}, size_t{4}, kRows - 1, kRows, kRows + 1}) {
      SCOPED_TRACE("pool " + std::to_string(p != nullptr) + " differ " + std::to_string(differ));
      // next[i]: the token fed after row i; differ >= kRows - 1: none differs,
      // differ == kRows + 1: nothing compared at all.
      std::vector<uint32_t> next;
      for (size_t i = 0; i + 1 < kRows && differ <= kRows; ++i) {
        next.push_back(i == differ ? (argmax[i] + 1) % kVocab : argmax[i]);
      }
      WitnessChain ca(WitnessSeed{}, prompt), cb(WitnessSeed{}, prompt);
      SamplingScratch scratch;
      const StepContext ctx{5, {}, &ca, &scratch, nullptr};
      std::vector<StepOutcome> got = {{1, {}}};  // appended to, after what it holds
      const RowsChosen r = ChooseRows(logits, kRows, next, ctx, 5, &got, p);
      const size_t want_rows = differ < kRows - 1 ? differ + 1 : kRows;
      ASSERT_EQ(r.count, want_rows);
      EXPECT_EQ(r.ended, differ < kRows - 1);
      ASSERT_EQ(got.size(), want_rows + 1);
      for (size_t i = 0; i < want_rows; ++i) {
        const StepOutcome want = ChooseAndWitness(row(i), SamplingParams{}, static_cast<uint32_t>(5 + i), &cb, &scratch);
        EXPECT_EQ(got[i + 1].token, want.token) << i;
        EXPECT_EQ(got[i + 1].logits_sha256, want.logits_sha256) << i;
      }
      EXPECT_EQ(ca.Finalize(), cb.Finalize());
    }
  }
}

}  // namespace
}  // namespace lockstep::testing
