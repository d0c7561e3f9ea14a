// AVX-512 kernels (x86-64 only; compiled with -mavx512f -mavx512bw
// -mno-fma and -ffp-contract=off, so every mul and add stays separate).
#include <immintrin.h>

#include "engine/ops/kernels_isa.h"
#include "engine/ops/panel_matmul_impl.h"

namespace lockstep::ops {
namespace {

struct Avx512 {
  using V = __m512;
  static constexpr size_t kLanes = 16;
  static V Zero() { return _mm512_setzero_ps(); }
  static V Broadcast(float f) { return _mm512_set1_ps(f); }
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static V Load(const uint16_t* p) {  // §4.1: bf16 bits << 16
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static __m512i Indices(size_t stride) {
    const int s = static_cast<int>(stride);
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32(s));
  }
  static V Gather(const float* base, __m512i idx) { return _mm512_i32gather_ps(idx, base, 4); }
};

// Decode: 2 panels (4 zmm chains); prefill: 2 zmm x 8 tokens.
void MatmulPacked(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok,
                  float* y, size_t ys) {
  panel_impl::MatmulPacked<Avx512, 2, 2, 8>(w, p0, p1, x, n_tok, y, ys);
}

}  // namespace

const Kernels& Avx512Kernels() {
  static const Kernels k{"avx512", &panel_impl::MatmulRowsT<Avx512>, &MatmulPacked,
                         &panel_impl::AttendHeadT<Avx512>};
  return k;
}

}  // namespace lockstep::ops
