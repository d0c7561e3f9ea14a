// Test inputs for the kernel tests: floats from bit patterns, and random
// values with varied exponents, with (when `special`) ±0, ±inf, NaN,
// denormals and huge values mixed in. Deterministic for a given rng seed.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace lockstep::ops::testing {

inline float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

inline std::vector<float> RandomValues(std::mt19937& rng, size_t n, bool special) {
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::uniform_int_distribution<int> pick(0, 15);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), FromBits(0xFFC00000u),
                            FromBits(0x00000001u), FromBits(0x807FFFFFu), 1e30f, -1e-30f};
  std::vector<float> v(n);
  for (float& x : v) {
    x = u(rng) * std::ldexp(1.0f, pick(rng) - 8);
    if (special && pick(rng) == 0) x = specials[static_cast<size_t>(pick(rng)) % 9];
  }
  return v;
}

}  // namespace lockstep::ops::testing
