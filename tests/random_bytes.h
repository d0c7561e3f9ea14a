// RandomBytes: n bytes from std::mt19937 seeded with `seed` — the same
// bytes for the same arguments, for tests that feed kernels arbitrary data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace lockstep::testing {

inline std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (uint8_t& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

}  // namespace lockstep::testing
