// AVX2 kernels (x86-64 only; compiled with -mavx2 -mf16c -mno-fma and
// -ffp-contract=off, so every mul and add stays separate).
#include <immintrin.h>

#include "engine/ops/attention_impl.h"
#include "engine/ops/kernels_isa.h"
#include "engine/ops/panel_matmul_impl.h"
#include "engine/ops/pinned_math.h"
#include "engine/ops/quant_matmul_impl.h"

namespace lockstep::ops {
namespace {

__m256 Set(uint32_t bits) { return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(bits))); }
__m256 Where(__m256 mask, __m256 yes, __m256 no) { return _mm256_blendv_ps(no, yes, mask); }

// LdexpExact (§6.2.1) in every lane; k holds integral values.
__m256 Ldexp8(__m256 x, __m256i k) {
  const __m256i bits = _mm256_castps_si256(x);
  const __m256i e = _mm256_add_epi32(_mm256_and_si256(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(0xFF)), k);
  const __m256i keep = _mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(~(0xFFu << 23))));
  __m256 out = _mm256_castsi256_ps(_mm256_or_si256(keep, _mm256_slli_epi32(e, 23)));
  const __m256 inf = _mm256_castsi256_ps(_mm256_or_si256(
      _mm256_and_si256(bits, _mm256_set1_epi32(static_cast<int>(0x80000000u))), _mm256_set1_epi32(0x7F800000)));
  out = Where(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(1), e)), _mm256_setzero_ps(), out);
  out = Where(_mm256_castsi256_ps(_mm256_cmpgt_epi32(e, _mm256_set1_epi32(0xFE))), inf, out);
  return Where(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_EQ_OQ), x, out);
}

// ExpPinned (§6.2) in every lane: the same operations in the same order.
__m256 Exp8(__m256 x) {
  const __m256 t = _mm256_mul_ps(x, Set(kExpLog2e));
  const __m256 z0 = _mm256_add_ps(t, _mm256_set1_ps(0.5f));
  __m256 k = _mm256_cvtepi32_ps(_mm256_cvttps_epi32(z0));  // FloorSmall
  k = Where(_mm256_cmp_ps(k, z0, _CMP_GT_OQ), _mm256_sub_ps(k, _mm256_set1_ps(1.0f)), k);
  const __m256 r0 = _mm256_sub_ps(x, _mm256_mul_ps(k, Set(kExpC1)));
  const __m256 r = _mm256_sub_ps(r0, _mm256_mul_ps(k, Set(kExpC2)));
  const __m256 r2 = _mm256_mul_ps(r, r);
  __m256 poly = Set(kExpP[0]);
  for (int i = 1; i <= 5; ++i) poly = _mm256_add_ps(_mm256_mul_ps(poly, r), Set(kExpP[i]));
  const __m256 result = _mm256_add_ps(_mm256_add_ps(_mm256_mul_ps(poly, r2), r), _mm256_set1_ps(1.0f));
  __m256 out = Ldexp8(result, _mm256_cvttps_epi32(k));
  out = Where(_mm256_cmp_ps(x, _mm256_set1_ps(-88.0f), _CMP_LT_OQ), _mm256_setzero_ps(), out);
  out = Where(_mm256_cmp_ps(x, _mm256_set1_ps(88.0f), _CMP_GT_OQ), Set(0x7F800000u), out);
  return Where(_mm256_cmp_ps(x, x, _CMP_UNORD_Q), x, out);
}

// SoftmaxSeq's max (value from the lanes, a zero's sign from the
// sequential scan, as MaxFirst16 in kernels_avx512.cc) and exp(x - max).
void ExpShift8(float* v, size_t n) {
  __m256 m = _mm256_set1_ps(v[0]);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) m = _mm256_max_ps(_mm256_loadu_ps(v + i), m);  // x > m ? x : m
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, m);
  float max_v = v[0];
  for (float x : lanes) max_v = x > max_v ? x : max_v;
  for (; i < n; ++i) max_v = v[i] > max_v ? v[i] : max_v;
  if (max_v == 0.0f) {
    for (i = 1, max_v = v[0]; i < n; ++i) {
      if (v[i] > max_v) max_v = v[i];
    }
  }
  const __m256 vmax = _mm256_set1_ps(max_v);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(v + i, Exp8(_mm256_sub_ps(_mm256_loadu_ps(v + i), vmax)));
  for (; i < n; ++i) v[i] = ExpPinned(v[i] - max_v);
}

void Divide8(float* v, size_t n, float denom) {
  const __m256 vden = _mm256_set1_ps(denom);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(v + i, _mm256_div_ps(_mm256_loadu_ps(v + i), vden));
  for (; i < n; ++i) v[i] = v[i] / denom;
}

// §10: out = (x / (1 + exp_pinned(-x))) * up, 8 lanes at a time.
void SiluMul8(const float* gate, const float* up, size_t n, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m256 neg = _mm256_xor_ps(x, Set(0x80000000u));  // -x: flip the sign bit
    const __m256 denom = _mm256_add_ps(_mm256_set1_ps(1.0f), Exp8(neg));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(x, denom), _mm256_loadu_ps(up + i)));
  }
  SiluMul(gate + i, up + i, n - i, out + i);
}

struct Avx2 {
  using V = __m256;
  static constexpr size_t kLanes = 8;
  static V Zero() { return _mm256_setzero_ps(); }
  static V Broadcast(float f) { return _mm256_set1_ps(f); }
  static V Load(const float* p) { return _mm256_loadu_ps(p); }
  static V WidenLow(const uint16_t* p) {  // §4.1 on each word's low bf16
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), 16));
  }
  static V WidenHigh(const uint16_t* p) {  // §4.1 on each word's high bf16
    return _mm256_castsi256_ps(_mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
                                                _mm256_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  static V Add(V a, V b) { return _mm256_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static void Store(float* p, V v) { _mm256_storeu_ps(p, v); }
  // F16C's vcvtph2ps: exact for every half, subnormals too (it ignores DAZ).
  static V LoadF16(const uint8_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  using VI = __m256i;
  static VI LoadU8(const uint8_t* p) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static VI LoadI8(const uint8_t* p) {
    return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  }
  static V ToF32(VI v) { return _mm256_cvtepi32_ps(v); }
  template <int n>
  static VI Srl(VI v) { return _mm256_srli_epi32(v, n); }
  template <int n>
  static VI Sll(VI v) { return _mm256_slli_epi32(v, n); }
  static VI And(VI v, int mask) { return _mm256_and_si256(v, _mm256_set1_epi32(mask)); }
  static VI Or(VI a, VI b) { return _mm256_or_si256(a, b); }
  static VI SubI(VI v, int n) { return _mm256_sub_epi32(v, _mm256_set1_epi32(n)); }
  template <int bias>
  static V Nib(VI v) {  // f32((v & 15) + bias)
    const VI q = And(v, 15);
    if constexpr (bias == 0) return ToF32(q);
    else return ToF32(_mm256_add_epi32(q, _mm256_set1_epi32(bias)));
  }
  static __m256i Indices(size_t stride) {
    const int s = static_cast<int>(stride);
    return _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(s));
  }
  static V Gather(const float* base, __m256i idx) { return _mm256_i32gather_ps(base, idx, 4); }
  static void ExpShift(float* v, size_t n) { ExpShift8(v, n); }
  static void Divide(float* v, size_t n, float denom) { Divide8(v, n, denom); }
};

// Decode: 2 panels (8 ymm chains); prefill: 2 ymm x 4 tokens.
// Quantized weights: decode 2 panels; more tokens 2 ymm x 4 tokens.
void MatmulPacked(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok,
                  float* y, size_t ys) {
  if (QuantPanelOf(w.type()) != nullptr) {
    return quant_impl::Matmul<Avx2, 1, 2, 4>(w, p0, p1, x, n_tok, y, ys);
  }
  panel_impl::MatmulPacked<Avx2, 2, 2, 4>(w, p0, p1, x, n_tok, y, ys);
}

}  // namespace

const Kernels& Avx2Kernels() {
  static const Kernels k{"avx2", &panel_impl::MatmulRowsT<Avx2>, &MatmulPacked,
                         &attention_impl::AttendScoresT<Avx2, 2, 2>,
                         &attention_impl::SoftmaxRowsT<Avx2>,
                         &attention_impl::AttendMixT<Avx2, 4, 2>, &SiluMul8};
  return k;
}

}  // namespace lockstep::ops
