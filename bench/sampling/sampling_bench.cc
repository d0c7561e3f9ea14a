// ChooseToken over a SmolLM2-sized vocabulary (49,152 logits): greedy, and
// sampled with the parameters a chat client sends. The logits are seeded
// noise around a few large values, as a language model's are. ChooseAll:
// a whole step's choices and digests (ChooseAndWitnessAll) for 1 or 8
// sessions, on the calling thread or a pool of 2 — what a decode step
// spends after its logits.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/ops/fp_env.h"
#include "engine/ops/thread_pool.h"
#include "engine/sampling.h"
#include "engine/step_outcome.h"

namespace {

std::vector<float> SeededLogits(size_t n) {
  std::vector<float> v(n);
  uint64_t s = 0x5DEECE66Dull;
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    v[i] = static_cast<float>(static_cast<int32_t>(s >> 40) - (1 << 23)) * 0x1p-20f;  // [-8, 8)
  }
  for (size_t i = 0; i < n; i += 997) v[i] += 12.0f;
  return v;
}

void Choose(benchmark::State& state, float temperature, uint32_t top_k, float top_p) {
  if (!lockstep::ops::PinFpEnvironment().ok()) {
    state.SkipWithError("cannot pin FTZ/DAZ");
    return;
  }
  const std::vector<float> logits = SeededLogits(49152);
  lockstep::SamplingScratch scratch;
  const lockstep::SamplingParams p{temperature, top_k, top_p, 42};
  uint32_t step = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(lockstep::ChooseToken(logits, p, step++, &scratch));
  }
}

// args: sessions, threads (1: no pool); greedy.
void ChooseAll(benchmark::State& state) {
  if (!lockstep::ops::PinFpEnvironment().ok()) {
    state.SkipWithError("cannot pin FTZ/DAZ");
    return;
  }
  const size_t n = static_cast<size_t>(state.range(0)), threads = static_cast<size_t>(state.range(1));
  std::unique_ptr<lockstep::ops::ThreadPool> pool;
  if (threads > 1) pool = std::move(lockstep::ops::ThreadPool::Create(threads).value());
  const std::vector<float> logits = SeededLogits(49152);
  const lockstep::SamplingParams p;
  std::vector<lockstep::WitnessChain> chains;
  for (size_t i = 0; i < n; ++i) chains.emplace_back(lockstep::WitnessSeed{}, std::span<const uint32_t>());
  std::vector<lockstep::SamplingScratch> scratch(n);
  std::vector<lockstep::StepOutcome> outs(n);
  std::vector<lockstep::StepChoice> choices;
  for (size_t i = 0; i < n; ++i) choices.push_back({logits, &p, 0, &chains[i], &scratch[i], &outs[i]});
  for (auto _ : state) {
    lockstep::ChooseAndWitnessAll(choices, pool.get());
    benchmark::DoNotOptimize(outs.data());
  }
}

BENCHMARK(ChooseAll)->Args({1, 1})->Args({1, 2})->Args({8, 1})->Args({8, 2})->UseRealTime();

BENCHMARK_CAPTURE(Choose, greedy, 0.0f, 0, 1.0f);
BENCHMARK_CAPTURE(Choose, t0_8, 0.8f, 0, 1.0f);
BENCHMARK_CAPTURE(Choose, t0_8_top_p_0_9, 0.8f, 0, 0.9f);
BENCHMARK_CAPTURE(Choose, t0_8_top_k_40, 0.8f, 40, 1.0f);

}  // namespace

BENCHMARK_MAIN();
