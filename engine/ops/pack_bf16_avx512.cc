// PackBf16PanelAvx512 (pack_bf16.h). Built with AVX-512F/BW flags
// (engine/ops/CMakeLists.txt), reached only after the CPUID check in
// pack_bf16.cc. Integer moves only.
#include <immintrin.h>

#include <cstring>

#include "engine/ops/pack_bf16.h"
#include "engine/ops/packed_matrix.h"

namespace lockstep::ops {
namespace {

constexpr size_t kBlock = 16;  // columns per register transpose

// t[j] holds 16 u32 words, word k = row j [k] | row 16 + j [k] << 16, for
// columns k0 .. k0 + 15; on return t[k] is k-row k0 + k (word j as above).
void Transpose16x16(__m512i t[16]) {
  __m512i a[16], b[16];
  for (int p = 0; p < 8; ++p) {
    a[2 * p] = _mm512_unpacklo_epi32(t[2 * p], t[2 * p + 1]);
    a[2 * p + 1] = _mm512_unpackhi_epi32(t[2 * p], t[2 * p + 1]);
  }
  // b[4m + q], 128-bit lane L: rows 4m .. 4m + 3 of column 4L + q.
  for (int m = 0; m < 4; ++m) {
    b[4 * m + 0] = _mm512_unpacklo_epi64(a[4 * m], a[4 * m + 2]);
    b[4 * m + 1] = _mm512_unpackhi_epi64(a[4 * m], a[4 * m + 2]);
    b[4 * m + 2] = _mm512_unpacklo_epi64(a[4 * m + 1], a[4 * m + 3]);
    b[4 * m + 3] = _mm512_unpackhi_epi64(a[4 * m + 1], a[4 * m + 3]);
  }
  for (int q = 0; q < 4; ++q) {
    const __m512i v0 = _mm512_shuffle_i32x4(b[q], b[4 + q], 0x88);
    const __m512i w0 = _mm512_shuffle_i32x4(b[8 + q], b[12 + q], 0x88);
    const __m512i v1 = _mm512_shuffle_i32x4(b[q], b[4 + q], 0xDD);
    const __m512i w1 = _mm512_shuffle_i32x4(b[8 + q], b[12 + q], 0xDD);
    t[q] = _mm512_shuffle_i32x4(v0, w0, 0x88);
    t[8 + q] = _mm512_shuffle_i32x4(v0, w0, 0xDD);
    t[4 + q] = _mm512_shuffle_i32x4(v1, w1, 0x88);
    t[12 + q] = _mm512_shuffle_i32x4(v1, w1, 0xDD);
  }
}

}  // namespace

void PackBf16PanelAvx512(const uint8_t* rows, size_t row_bytes, size_t cols, uint16_t* panel) {
  static_assert(kPanelRows == 32 && Bf16Slot(1) == 2 && Bf16Slot(16) == 1,
                "the transpose below builds the interleaved 32-row k-row");
  // Word k of z = [row j | row 16 + j] is (row j [k], row 16 + j [k]).
  alignas(64) static constexpr uint16_t kInterleave[32] = {
      0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23,
      8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kInterleave);
  size_t k0 = 0;
  for (; k0 + kBlock <= cols; k0 += kBlock) {
    __m512i t[16];
    for (size_t j = 0; j < 16; ++j) {
      const __m256i lo = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(rows + j * row_bytes + 2 * k0));
      const __m256i hi = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(rows + (16 + j) * row_bytes + 2 * k0));
      t[j] = _mm512_permutexvar_epi16(idx, _mm512_inserti64x4(_mm512_zextsi256_si512(lo), hi, 1));
    }
    Transpose16x16(t);
    for (size_t k = 0; k < kBlock; ++k) {
      _mm512_storeu_si512(panel + (k0 + k) * kPanelRows, t[k]);
    }
  }
  for (size_t i = 0; i < kPanelRows && k0 < cols; ++i) {  // the last cols % 16 columns
    const uint8_t* src = rows + i * row_bytes;
    uint16_t* dst = panel + Bf16Slot(i);
    for (size_t k = k0; k < cols; ++k) std::memcpy(dst + k * kPanelRows, src + 2 * k, 2);
  }
}

}  // namespace lockstep::ops
