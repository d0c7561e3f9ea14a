// AVX2 kernels (x86-64 only; compiled with -mavx2 -mno-fma and
// -ffp-contract=off, so every mul and add stays separate).
#include <immintrin.h>

#include "engine/ops/attention_impl.h"
#include "engine/ops/kernels_isa.h"
#include "engine/ops/panel_matmul_impl.h"

namespace lockstep::ops {
namespace {

struct Avx2 {
  using V = __m256;
  static constexpr size_t kLanes = 8;
  static V Zero() { return _mm256_setzero_ps(); }
  static V Broadcast(float f) { return _mm256_set1_ps(f); }
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static V Load(const uint16_t* p) {  // §4.1: bf16 bits << 16
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static __m256i Indices(size_t stride) {
    const int s = static_cast<int>(stride);
    return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(s));
  }
  static V Gather(const float* base, __m256i idx) { return _mm256_i32gather_ps(base, idx, 4); }
  static void ExpShift(float* v, size_t n) { attention_impl::ExpShiftSeq(v, n); }
  static void Divide(float* v, size_t n, float denom) { attention_impl::DivideSeq(v, n, denom); }
};

// Decode: 2 panels (8 ymm chains); prefill: 2 ymm x 4 tokens.
void MatmulPacked(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok,
                  float* y, size_t ys) {
  panel_impl::MatmulPacked<Avx2, 2, 2, 4>(w, p0, p1, x, n_tok, y, ys);
}

}  // namespace

const Kernels& Avx2Kernels() {
  static const Kernels k{"avx2", &panel_impl::MatmulRowsT<Avx2>, &MatmulPacked,
                         &attention_impl::AttendScoresT<Avx2, 2, 2>,
                         &attention_impl::SoftmaxRowsT<Avx2>,
                         &attention_impl::AttendMixT<Avx2, 4, 2>, &SiluMul};
  return k;
}

}  // namespace lockstep::ops
