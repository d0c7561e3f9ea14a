// A decode step allocates nothing once the cache and scratch are sized at
// session start (tests/counting_allocator.h counts every operator new).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <new>

#include "engine/batch_stepper.h"
#include "engine/decode_session.h"
#include "engine/local_backend.h"
#include "model_fixture.h"
#include "tests/fixture_absent.h"

#include "tests/counting_allocator.h"

namespace lockstep::testing {
namespace {

TEST(DecodeAlloc, CounterSeesAllocations) {
  g_allocs = 0;
  g_counting = true;
  auto* v = new std::vector<int>(10);
  g_counting = false;
  delete v;
  EXPECT_GE(g_allocs.load(), 2u);
}

// Steps of one session and of a batch, after a warm-up step; a dense
// model and a MoE one (E4: routing, grouping by expert).
class DecodeAllocModels : public ::testing::TestWithParam<std::string> {};

TEST_P(DecodeAllocModels, DecodeStepsAllocateNothing) {
  if (!std::filesystem::exists(ConformanceDir(GetParam()))) LOCKSTEP_FIXTURE_ABSENT();
  auto model = OpenModelDir(ConformanceDir(GetParam()), ModelPins{});
  ASSERT_TRUE(model.ok());
  for (const Variant& v : {Variant{"scalar", 1, WeightFormat::kPackedBf16},
                           Variant{ops::AvailableIsas().back(), 2, WeightFormat::kPackedBf16}}) {
    Loaded l = Load(*model, v);
    const Stage& st = *l.stage;
    const size_t steps = 20, h = st.hidden();
    KvCache a = st.NewCache(steps + 4), b = st.NewCache(steps + 4);
    ForwardScratch scratch = st.NewScratch(4, steps + 4);
    std::vector<float> ha, hb, logits(2 * st.vocab());
    ha.reserve(4 * h);
    hb.reserve(4 * h);
    const uint32_t prompt[] = {1, 2, 3, 4};
    ASSERT_TRUE(st.Embed(prompt, &ha).ok());
    ASSERT_TRUE(st.Forward(ha, 0, a, scratch).ok());
    ASSERT_TRUE(st.Embed(prompt, &hb).ok());
    ASSERT_TRUE(st.Forward(hb, 0, b, scratch).ok());
    uint32_t tok[2] = {5, 6};
    std::vector<float> rows(2 * h);
    g_allocs = 0;
    g_counting = true;
    for (size_t s = 0; s < steps; ++s) {
      ASSERT_TRUE(st.Embed(std::span<const uint32_t>(&tok[0], 1), &ha).ok());
      ASSERT_TRUE(st.Embed(std::span<const uint32_t>(&tok[1], 1), &hb).ok());
      if (s % 2 == 0) {  // solo steps
        ASSERT_TRUE(st.Forward(ha, static_cast<int64_t>(a.size()), a, scratch).ok());
        ASSERT_TRUE(st.Forward(hb, static_cast<int64_t>(b.size()), b, scratch).ok());
      } else {  // a batched step
        const Stage::BatchItem items[] = {{ha, static_cast<int64_t>(a.size()), &a},
                                          {hb, static_cast<int64_t>(b.size()), &b}};
        ASSERT_TRUE(st.ForwardBatch(items, scratch).ok());
      }
      std::copy(ha.begin(), ha.end(), rows.begin());
      std::copy(hb.begin(), hb.end(), rows.begin() + static_cast<ptrdiff_t>(h));
      st.LogitsBatch(rows, logits, scratch);
      tok[0] = ops::ArgmaxFirst(logits.data(), st.vocab());
      tok[1] = ops::ArgmaxFirst(logits.data() + st.vocab(), st.vocab());
    }
    g_counting = false;
    EXPECT_EQ(g_allocs.load(), 0u) << v.Name();
  }
}

INSTANTIATE_TEST_SUITE_P(Models, DecodeAllocModels,
                         ::testing::Values("tiny-llama", "tiny-qwen3-moe"),
                         [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

// The session path `lockstep run` and `lockstep bench` time: after the
// prefill, LocalBackend::Feed of one token allocates nothing.
TEST(DecodeAlloc, LocalBackendFeedAllocatesNothing) {
  ASSERT_TRUE(std::filesystem::exists(ConformanceDir("tiny-llama")))
      << "missing fixture " << ConformanceDir("tiny-llama");
  auto model = OpenModelDir(ConformanceDir("tiny-llama"), ModelPins{});
  ASSERT_TRUE(model.ok());
  for (const Variant& v : {Variant{"scalar", 1, WeightFormat::kPackedBf16},
                           Variant{ops::AvailableIsas().back(), 2, WeightFormat::kPackedBf16}}) {
    Loaded l = Load(*model, v);
    ASSERT_TRUE(l) << v.Name();
    const size_t steps = 20;
    const uint32_t prompt[] = {1, 2, 3, 4};
    LocalBackend backend(*l, std::size(prompt) + steps);
    std::vector<float> logits;
    ASSERT_TRUE(backend.Feed(prompt, &logits).ok());
    uint32_t token = ops::ArgmaxFirst(logits.data(), logits.size());
    g_allocs = 0;
    g_counting = true;
    for (size_t s = 0; s < steps; ++s) {
      const Status st = backend.Feed(std::span<const uint32_t>(&token, 1), &logits);
      if (!st.ok()) break;
      token = ops::ArgmaxFirst(logits.data(), logits.size());
    }
    g_counting = false;
    EXPECT_EQ(backend.CacheLength(), std::size(prompt) + steps) << v.Name();
    EXPECT_EQ(g_allocs.load(), 0u) << v.Name();
  }
}

// The server's and bench's path: DecodeSessions stepped together by a
// LocalBatchStepper (sampled and greedy, one evicting) allocate nothing
// per step once the stepper is reserved and the prompts are in.
TEST(DecodeAlloc, BatchedDecodeSessionsAllocateNothing) {
  ASSERT_TRUE(std::filesystem::exists(ConformanceDir("tiny-llama")))
      << "missing fixture " << ConformanceDir("tiny-llama");
  auto model = OpenModelDir(ConformanceDir("tiny-llama"), ModelPins{});
  ASSERT_TRUE(model.ok());
  Loaded l = Load(*model, Variant{ops::AvailableIsas().back(), 2, WeightFormat::kPackedBf16});
  const uint32_t gen = 16;
  std::vector<DecodeRequest> reqs(3);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].prompt = {1, 2, static_cast<uint32_t>(3 + i), 4};
    reqs[i].gen = gen;
  }
  reqs[1].sampling.temperature = 0.8f;
  reqs[1].sampling.seed = 7;
  reqs[2].evictions = {{1, 2, 5}};
  std::vector<std::unique_ptr<LocalBackend>> backends;
  std::vector<std::unique_ptr<DecodeSession>> sessions;
  std::vector<DecodeSession*> batch;
  for (const DecodeRequest& r : reqs) {
    backends.push_back(std::make_unique<LocalBackend>(*l, r.prompt.size() + gen));
    sessions.push_back(std::make_unique<DecodeSession>(*backends.back(), r, model->Seed()));
    batch.push_back(sessions.back().get());
  }
  LocalBatchStepper stepper(*l);
  stepper.Reserve(16, batch.size(), 4 + gen);
  std::vector<Status> status(batch.size());
  stepper.Step(batch, 64, status);  // the prompts: their first rows size the buffers
  g_allocs = 0;
  g_counting = true;
  for (uint32_t s = 1; s < gen; ++s) stepper.Step(batch, 64, status);
  g_counting = false;
  for (const Status& st : status) EXPECT_TRUE(st.ok()) << st.ToString();
  for (const auto& s : sessions) EXPECT_TRUE(s->done());
  EXPECT_EQ(g_allocs.load(), 0u);
}

}  // namespace
}  // namespace lockstep::testing
