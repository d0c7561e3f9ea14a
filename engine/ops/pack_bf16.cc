#include "engine/ops/pack_bf16.h"

#include <cstring>

#include "engine/ops/packed_matrix.h"

namespace lockstep::ops {

void PackBf16PanelScalar(const uint8_t* rows, size_t row_bytes, size_t cols, uint16_t* panel) {
  for (size_t i = 0; i < kPanelRows; ++i) {
    const uint8_t* src = rows + i * row_bytes;
    uint16_t* dst = panel + Bf16Slot(i);
    for (size_t k = 0; k < cols; ++k) std::memcpy(dst + k * kPanelRows, src + 2 * k, 2);
  }
}

PackBf16PanelFn BestPackBf16Panel() {
#if defined(__x86_64__)
  static const PackBf16PanelFn best = [] {
    __builtin_cpu_init();
    const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
    return avx512 ? &PackBf16PanelAvx512 : &PackBf16PanelScalar;
  }();
  return best;
#else
  return &PackBf16PanelScalar;
#endif
}

}  // namespace lockstep::ops
