#include "engine/sampling.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <utility>

#include "engine/ops/kernels.h"
#include "engine/ops/pinned_math.h"

namespace lockstep {
namespace {

// A uint32 whose unsigned order is the total order of the float's bits:
// -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN.
uint32_t OrderKey(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  return (b & 0x80000000u) != 0 ? ~b : (b | 0x80000000u);
}

uint32_t CandidateId(uint64_t packed) { return static_cast<uint32_t>(packed); }

// Sorts candidates — (~OrderKey(z) << 32) | id, appended in ascending id
// order — ascending, i.e. z descending then id ascending. A stable LSD
// radix sort on the high half: stability keeps equal keys in ascending id
// order, so the result is exactly a comparison sort of the 64-bit values,
// in a few linear passes instead of n log n comparisons. A pass whose digit
// is the same for every candidate moves nothing and is skipped.
void SortCandidates(std::vector<uint64_t>& v, std::vector<uint64_t>& spare) {
  constexpr int kDigitBits = 11;
  constexpr size_t kBuckets = size_t{1} << kDigitBits;
  spare.resize(v.size());
  std::array<uint32_t, kBuckets> start;
  for (int shift = 32; shift < 64; shift += kDigitBits) {
    start.fill(0);
    for (uint64_t c : v) ++start[(c >> shift) & (kBuckets - 1)];
    if (start[(v.front() >> shift) & (kBuckets - 1)] == v.size()) continue;
    uint32_t sum = 0;
    for (uint32_t& s : start) sum += std::exchange(s, sum);
    for (uint64_t c : v) spare[start[(c >> shift) & (kBuckets - 1)]++] = c;
    v.swap(spare);
  }
}

}  // namespace

Status ValidateSamplingParams(const SamplingParams& p) {
  if (!(p.temperature == 0.0f || (p.temperature >= 1e-3f && p.temperature <= 100.0f))) {
    return InvalidError("temperature must be 0 (greedy) or between 0.001 and 100, got " +
                        std::to_string(p.temperature));
  }
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f)) {
    return InvalidError("top_p must be in (0, 1], got " + std::to_string(p.top_p));
  }
  return Status::Ok();
}

float SamplingUniform(uint64_t seed, uint32_t step) {
  // Output number step+1 of SplitMix64 seeded with `seed` (Steele, Lea,
  // Flood 2014): the state advances by the golden gamma, then the mix.
  uint64_t z = seed + (static_cast<uint64_t>(step) + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return static_cast<float>(z >> 40) * 0x1p-24f;  // exact: 24 bits
}

uint32_t ChooseToken(std::span<const float> logits, const SamplingParams& p, uint32_t step,
                     SamplingScratch* scratch) {
  if (p.temperature == 0.0f) return ops::ArgmaxFirst(logits.data(), logits.size());  // §11.2
  const size_t n = logits.size();
  std::vector<float>& z = scratch->z;
  z.resize(n);
  size_t best = 0;
  for (size_t i = 0; i < n; ++i) {
    z[i] = logits[i] / p.temperature;
    if (OrderKey(z[i]) > OrderKey(z[best])) best = i;
  }
  const float m = z[best];
  std::vector<uint64_t>& order = scratch->order;
  order.clear();
  for (size_t i = 0; i < n; ++i) {
    const float e = ops::ExpPinned(z[i] - m);
    if (e > 0.0f) order.push_back((static_cast<uint64_t>(~OrderKey(z[i])) << 32) | i);
    z[i] = e;  // from here on z holds e, by id
  }
  if (order.empty()) return static_cast<uint32_t>(best);  // only if m is NaN
  SortCandidates(order, scratch->spare);
  size_t kept = order.size();
  if (p.top_k > 0 && p.top_k < kept) kept = p.top_k;
  auto e_of = [&](size_t j) { return z[CandidateId(order[j])]; };
  float total = 0.0f;
  if (p.top_p < 1.0f) {
    float all = 0.0f;
    for (size_t j = 0; j < kept; ++j) all = all + e_of(j);
    const float threshold = p.top_p * all;
    size_t j = 0;
    for (; j < kept; ++j) {
      total = total + e_of(j);
      if (total >= threshold) break;
    }
    kept = std::min(j + 1, kept);
  } else {
    for (size_t j = 0; j < kept; ++j) total = total + e_of(j);
  }
  const float target = SamplingUniform(p.seed, step) * total;
  float running = 0.0f;
  for (size_t j = 0; j < kept; ++j) {
    running = running + e_of(j);
    if (running > target) return CandidateId(order[j]);
  }
  return CandidateId(order[kept - 1]);
}

}  // namespace lockstep
