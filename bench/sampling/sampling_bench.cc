// ChooseToken over a SmolLM2-sized vocabulary (49,152 logits): greedy, and
// sampled with the parameters a chat client sends. The logits are seeded
// noise around a few large values, as a language model's are.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "engine/ops/fp_env.h"
#include "engine/sampling.h"

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

BENCHMARK_CAPTURE(Choose, greedy, 0.0f, 0, 1.0f);
BENCHMARK_CAPTURE(Choose, t0_8, 0.8f, 0, 1.0f);
BENCHMARK_CAPTURE(Choose, t0_8_top_p_0_9, 0.8f, 0, 0.9f);
BENCHMARK_CAPTURE(Choose, t0_8_top_k_40, 0.8f, 40, 1.0f);

}  // namespace

BENCHMARK_MAIN();
