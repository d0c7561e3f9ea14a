// Packing one whole bf16 panel (packed_matrix.h): kPanelRows = 32 source
// rows of `cols` little-endian bf16 values each, `row_bytes` apart, into
// the panel's cols k-rows of 32 values, row i at Bf16Slot(i).
//
// PackBf16PanelScalar is the definition, element by element.
// PackBf16PanelAvx512 (AVX-512F/BW, its own TU) transposes 16 columns at a
// time in registers and stores whole 64-byte k-rows; pure data movement,
// so it gives the same bytes (tests/ops/pack_bf16_test.cc checks it).
// BestPackBf16Panel picks by CPUID. Source rows may have any alignment;
// the panel needs none either. Thread-safe (no state).
#pragma once

#include <cstddef>
#include <cstdint>

namespace lockstep::ops {

using PackBf16PanelFn = void (*)(const uint8_t* rows, size_t row_bytes, size_t cols,
                                 uint16_t* panel);

void PackBf16PanelScalar(const uint8_t* rows, size_t row_bytes, size_t cols, uint16_t* panel);
#if defined(__x86_64__)
void PackBf16PanelAvx512(const uint8_t* rows, size_t row_bytes, size_t cols, uint16_t* panel);
#endif

// The fastest of the above this CPU runs.
PackBf16PanelFn BestPackBf16Panel();

}  // namespace lockstep::ops
