// Random valid GGUF blocks for the quantized-weight tests: random bytes
// (every quant pattern is valid) with the f16 scales drawn from a list of
// subnormal, negative, zero, largest and ordinary halves. Deterministic for
// a given rng state.
#pragma once

#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

#include "engine/ops/quant_blocks.h"

namespace lockstep::ops::testing {

inline constexpr uint16_t kScaleHalves[] = {0x0001, 0x03FF, 0x8001, 0x0200, 0x0000, 0x8000, 0x7BFF,
                                            0xFBFF, 0x3C00, 0xB555, 0x2E66, 0x1400, 0x0400, 0x6800};

inline void PutHalf(uint8_t* p, uint16_t h) {
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}

// n_blocks blocks of `type` one after another. F16 values are random
// halves other than inf/NaN (subnormals included); F32 and BF16 random
// finite values.
inline std::vector<uint8_t> RandomBlocks(std::mt19937& rng, GgmlType type, size_t n_blocks) {
  const GgmlBlock& b = BlockOf(type);
  std::vector<uint8_t> bytes(n_blocks * b.bytes);
  for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng());
  auto half = [&] { return kScaleHalves[rng() % std::size(kScaleHalves)]; };
  for (size_t i = 0; i < n_blocks; ++i) {
    uint8_t* p = bytes.data() + i * b.bytes;
    switch (type) {
      case GgmlType::kQ6_K: PutHalf(p + 208, half()); break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K: PutHalf(p + 2, half()); [[fallthrough]];
      case GgmlType::kQ8_0:
      case GgmlType::kQ4_0: PutHalf(p, half()); break;
      case GgmlType::kF16: p[1] = static_cast<uint8_t>(p[1] & 0xBF); break;  // exponent < 31
      case GgmlType::kBF16: p[1] = static_cast<uint8_t>(p[1] & 0xBF); break;
      case GgmlType::kF32: p[3] = static_cast<uint8_t>(p[3] & 0xBF); break;
    }
  }
  return bytes;
}

}  // namespace lockstep::ops::testing
