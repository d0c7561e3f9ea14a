// Long-context decode through every kernel table this CPU offers and 1, 2
// and 3 threads: a prompt of several hundred tokens fed in ragged chunks
// (many K tiles, partial last tiles), optionally a sliding window, then an
// eviction that moves survivors across tiles, then greedy decode steps
// (which take the split attention path with 2 and 3 threads). Every
// logits row equals the independent reference (reference.h) bit for bit,
// and so every variant equals every other.
#include <gtest/gtest.h>

#include <memory>

#include "engine/ops/dispatch.h"
#include "engine/ops/kernels.h"
#include "engine/ops/thread_pool.h"
#include "kv_test_util.h"
#include "reference.h"

namespace lockstep::kvtest {
namespace {

constexpr size_t kPrompt = 600;
constexpr int kSteps = 4;

ops::ThreadPool* Pool(size_t threads) {
  static std::unique_ptr<ops::ThreadPool> pools[4];
  if (threads < 2) return nullptr;
  if (!pools[threads]) {
    auto p = ops::ThreadPool::Create(threads);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    if (p.ok()) pools[threads] = std::move(p).value();
  }
  return pools[threads].get();
}

// The reference's logits: prompt, evict [37, 137), then kSteps greedy steps.
std::vector<std::vector<float>> Reference(const TestModel& m, std::span<const uint32_t> prompt,
                                          int window) {
  RefModel ref(m.open.config, m.weights);
  const auto windows = ref.Windows(window);
  RefCache rc = ref.Empty();
  std::vector<std::vector<float>> out = {ref.Run(rc, prompt, 0, windows).back()};
  RefEvict(rc, 37, 100, static_cast<size_t>(m.open.config.head_dim), m.stage->inv_freq());
  for (int s = 0; s < kSteps; ++s) {
    const uint32_t t = ops::ArgmaxFirst(out.back().data(), out.back().size());
    out.push_back(ref.Step(rc, t, static_cast<int64_t>(rc.pos.size()), windows));
  }
  return out;
}

void CheckVariant(const TestModel& m, const ops::Kernels& k, size_t threads,
                  std::span<const uint32_t> prompt, int window,
                  const std::vector<std::vector<float>>& want) {
  auto w = LoadStageWeights(*m.open.weights, m.open.config, StageSpec{0, m.layers(), true, true});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  const Stage stage(m.open.config, std::move(w).value(), k, StageOptions{Pool(threads)});
  LocalBackend b(stage);
  ASSERT_TRUE(b.SetWindow(window).ok());
  std::vector<float> logits;
  for (size_t at = 0; at < prompt.size();) {  // chunks of 250, 250, 100 rows
    const size_t n = std::min<size_t>(250, prompt.size() - at);
    ASSERT_TRUE(b.Feed(prompt.subspan(at, n), &logits).ok());
    at += n;
  }
  ASSERT_TRUE(SameBits(logits, want[0])) << "prefill";
  ASSERT_TRUE(b.Evict(37, 100).ok());
  for (int s = 0; s < kSteps; ++s) {
    const uint32_t t = ops::ArgmaxFirst(logits.data(), logits.size());
    ASSERT_TRUE(b.Feed(std::span(&t, 1), &logits).ok());
    ASSERT_TRUE(SameBits(logits, want[static_cast<size_t>(s) + 1])) << "decode step " << s;
  }
}

TEST(LongContext, EveryIsaAndThreadCountEqualsTheReference) {
  size_t checked = 0;
  for (const char* name : {"syn-g2-bias-untied", "syn-g3-bias"}) {
    const TestModel* m = GetModel(name);
    ASSERT_NE(m, nullptr) << name;
    const auto prompt = Tokens(*m, kPrompt, 60);
    for (int window : {0, 200}) {
      const auto want = Reference(*m, prompt, window);
      for (const std::string& isa : ops::AvailableIsas())
        for (size_t threads : {1, 2, 3}) {
          SCOPED_TRACE(std::string(name) + " W=" + std::to_string(window) + " " + isa + " t" +
                       std::to_string(threads));
          CheckVariant(*m, *ops::KernelsByName(isa), threads, prompt, window, want);
          ++checked;
        }
    }
  }
  EXPECT_GE(checked, 12u);
}

}  // namespace
}  // namespace lockstep::kvtest
