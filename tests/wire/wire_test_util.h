// Helpers shared by the wire tests: seeded payloads and bit comparisons.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "wire/hidden_frame.h"

namespace lockstep::wire::testing {

// Bit patterns a float codec must carry unchanged.
inline std::vector<uint32_t> AdversarialBits() {
  return {
      0x00000000u,  // +0
      0x80000000u,  // -0
      0x7f800000u,  // +inf
      0xff800000u,  // -inf
      0x7fc00000u,  // canonical quiet NaN
      0xffc00001u,  // negative quiet NaN with payload
      0x7f800001u,  // signalling NaN, smallest payload
      0x7fa5a5a5u,  // signalling NaN, patterned payload
      0xffbfffffu,  // negative signalling NaN, largest payload
      0x7fffffffu,  // quiet NaN, all payload bits
      0x00000001u,  // smallest subnormal
      0x807fffffu,  // largest negative subnormal
      0x00800000u,  // smallest normal
      0x7f7fffffu,  // largest finite
      0x3f800000u,  // 1.0
  };
}

// Floats built from raw bits (never from arithmetic).
inline std::vector<float> FloatsFromBits(const std::vector<uint32_t>& bits) {
  std::vector<float> out(bits.size());
  std::memcpy(out.data(), bits.data(), bits.size() * 4);
  return out;
}

// `n` floats with uniformly random bit patterns (all classes, NaNs included).
inline std::vector<float> RandomFloats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint32_t> bits(n);
  for (auto& b : bits) b = static_cast<uint32_t>(rng());
  return FloatsFromBits(bits);
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

inline HiddenFrame MakeHidden(uint32_t seq, uint32_t hidden, uint64_t seed) {
  HiddenFrame f;
  f.session_id = 0x0123456789abcdefull ^ seed;
  f.step = 7 + static_cast<uint32_t>(seed);
  f.first_position = 40;
  f.seq = seq;
  f.hidden = hidden;
  f.resume_layer = 12;
  f.payload = RandomFloats(size_t{seq} * hidden, seed);
  return f;
}

}  // namespace lockstep::wire::testing
