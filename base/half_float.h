// Exact widening of 16-bit floats to f32 bit patterns (CIS-2 §4.1 for
// bf16; IEEE binary16 for f16, as EXTENSIONS.md E2 reads F16 weights and
// block scales), by integer operations only, so no compiler flag or FPU
// mode can change a bit. Pure functions; thread-safe.
#pragma once

#include <bit>
#include <cstdint>

namespace lockstep {

// bf16 bits -> f32 bits: bits << 16.
inline uint32_t WidenBf16Bits(uint16_t b) { return static_cast<uint32_t>(b) << 16; }

// binary16 bits -> the f32 bits of the same value: subnormals become normal
// f32s, ±0 and ±inf stay, NaN payloads are kept.
inline uint32_t WidenF16Bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return sign | 0x7F800000u | (man << 13);  // inf, NaN
  if (exp != 0) return sign | ((exp + 112) << 23) | (man << 13);
  if (man == 0) return sign;  // ±0
  // man * 2^-24 with man < 2^10: normalise on its highest set bit k.
  const int k = 31 - std::countl_zero(man);
  return sign | (static_cast<uint32_t>(k + 103) << 23) | ((man << (23 - k)) & 0x7FFFFFu);
}

inline float WidenF16(uint16_t h) { return std::bit_cast<float>(WidenF16Bits(h)); }

}  // namespace lockstep
