// AVX-512 kernels (x86-64 only; compiled with -mavx512f -mavx512bw
// -mno-fma and -ffp-contract=off, so every mul and add stays separate).
#include <immintrin.h>

#include "engine/ops/attention_impl.h"
#include "engine/ops/kernels_isa.h"
#include "engine/ops/panel_matmul_impl.h"
#include "engine/ops/pinned_math.h"
#include "engine/ops/quant_matmul_impl.h"

namespace lockstep::ops {
namespace {

// Every lane. The zero-masked forms of shifts and conversions under it are
// the plain instructions; gcc 12 flags the plain intrinsics' undefined
// source operand as used uninitialized (-Wuninitialized).
constexpr __mmask16 kAll = 0xFFFF;

__m512 Set(uint32_t bits) { return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(bits))); }

// LdexpExact (§6.2.1) in every lane; k holds integral values.
__m512 Ldexp16(__m512 x, __m512i k) {
  const __m512i bits = _mm512_castps_si512(x);
  const __m512i e = _mm512_add_epi32(_mm512_and_si512(_mm512_maskz_srli_epi32(kAll, bits, 23), _mm512_set1_epi32(0xFF)), k);
  const __m512i keep = _mm512_and_si512(bits, _mm512_set1_epi32(static_cast<int>(~(0xFFu << 23))));
  __m512 out = _mm512_castsi512_ps(_mm512_or_si512(keep, _mm512_maskz_slli_epi32(kAll, e, 23)));
  const __m512i inf = _mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi32(static_cast<int>(0x80000000u))),
                                      _mm512_set1_epi32(0x7F800000));
  out = _mm512_mask_mov_ps(out, _mm512_cmple_epi32_mask(e, _mm512_setzero_si512()), _mm512_setzero_ps());
  out = _mm512_mask_mov_ps(out, _mm512_cmpge_epi32_mask(e, _mm512_set1_epi32(0xFF)), _mm512_castsi512_ps(inf));
  return _mm512_mask_mov_ps(out, _mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_EQ_OQ), x);
}

// ExpPinned (§6.2) in every lane: the same operations in the same order.
__m512 Exp16(__m512 x) {
  const __m512 t = _mm512_mul_ps(x, Set(kExpLog2e));
  const __m512 z0 = _mm512_add_ps(t, _mm512_set1_ps(0.5f));
  __m512 k = _mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_cvttps_epi32(kAll, z0));  // FloorSmall
  k = _mm512_mask_sub_ps(k, _mm512_cmp_ps_mask(k, z0, _CMP_GT_OQ), k, _mm512_set1_ps(1.0f));
  const __m512 r0 = _mm512_sub_ps(x, _mm512_mul_ps(k, Set(kExpC1)));
  const __m512 r = _mm512_sub_ps(r0, _mm512_mul_ps(k, Set(kExpC2)));
  const __m512 r2 = _mm512_mul_ps(r, r);
  __m512 poly = Set(kExpP[0]);
  for (int i = 1; i <= 5; ++i) poly = _mm512_add_ps(_mm512_mul_ps(poly, r), Set(kExpP[i]));
  const __m512 result = _mm512_add_ps(_mm512_add_ps(_mm512_mul_ps(poly, r2), r), _mm512_set1_ps(1.0f));
  __m512 out = Ldexp16(result, _mm512_maskz_cvttps_epi32(kAll, k));
  out = _mm512_mask_mov_ps(out, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-88.0f), _CMP_LT_OQ), _mm512_setzero_ps());
  out = _mm512_mask_mov_ps(out, _mm512_cmp_ps_mask(x, _mm512_set1_ps(88.0f), _CMP_GT_OQ),
                           _mm512_castsi512_ps(_mm512_set1_epi32(0x7F800000)));
  return _mm512_mask_mov_ps(out, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), x);
}

// SoftmaxSeq's max: v[0], then v[i] wherever v[i] > max (first occurrence).
// Lanes keep `x > m ? x : m` (what max_ps computes), so the value is the
// same; only the sign of a zero maximum can depend on the order, and then
// the sequential scan decides it.
float MaxFirst16(const float* v, size_t n) {
  __m512 m = _mm512_set1_ps(v[0]);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) m = _mm512_max_ps(_mm512_loadu_ps(v + i), m);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float max_v = v[0];
  for (float x : lanes) max_v = x > max_v ? x : max_v;
  for (; i < n; ++i) max_v = v[i] > max_v ? v[i] : max_v;
  if (max_v != 0.0f) return max_v;
  for (i = 1, max_v = v[0]; i < n; ++i) {
    if (v[i] > max_v) max_v = v[i];
  }
  return max_v;
}

// SoftmaxSeq's max and exp(x - max), 16 lanes at a time.
void ExpShift16(float* v, size_t n) {
  const float max_v = MaxFirst16(v, n);
  const __m512 vmax = _mm512_set1_ps(max_v);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(v + i, Exp16(_mm512_sub_ps(_mm512_loadu_ps(v + i), vmax)));
  for (; i < n; ++i) v[i] = ExpPinned(v[i] - max_v);
}

void Divide16(float* v, size_t n, float denom) {
  const __m512 vden = _mm512_set1_ps(denom);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(v + i, _mm512_div_ps(_mm512_loadu_ps(v + i), vden));
  for (; i < n; ++i) v[i] = v[i] / denom;
}

struct Avx512 {
  using V = __m512;
  static constexpr size_t kLanes = 16;
  static V Zero() { return _mm512_setzero_ps(); }
  static V Broadcast(float f) { return _mm512_set1_ps(f); }
  static V Load(const float* p) { return _mm512_loadu_ps(p); }
  static V WidenLow(const uint16_t* p) {  // §4.1 on each word's low bf16
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(p), 16));
  }
  static V WidenHigh(const uint16_t* p) {  // §4.1 on each word's high bf16
    return _mm512_castsi512_ps(
        _mm512_and_si512(_mm512_loadu_si512(p), _mm512_set1_epi32(static_cast<int>(0xFFFF0000u))));
  }
  static V Add(V a, V b) { return _mm512_add_ps(a, b); }
  static V Sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V Mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
  // vcvtph2ps: exact for every half, subnormals too (it ignores DAZ).
  static V LoadF16(const uint8_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  using VI = __m512i;
  static VI LoadU8(const uint8_t* p) {
    return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static VI LoadI8(const uint8_t* p) {
    return _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static V ToF32(VI v) { return _mm512_cvtepi32_ps(v); }
  template <int n>
  static VI Srl(VI v) { return _mm512_srli_epi32(v, n); }
  template <int n>
  static VI Sll(VI v) { return _mm512_slli_epi32(v, n); }
  static VI And(VI v, int mask) { return _mm512_and_si512(v, _mm512_set1_epi32(mask)); }
  static VI Or(VI a, VI b) { return _mm512_or_si512(a, b); }
  static VI SubI(VI v, int n) { return _mm512_sub_epi32(v, _mm512_set1_epi32(n)); }
  // f32((v & 15) + bias): vpermps reads only the index's low 4 bits.
  template <int bias>
  static V Nib(VI v) {
    const __m512 table = _mm512_setr_ps(bias + 0, bias + 1, bias + 2, bias + 3, bias + 4, bias + 5,
                                        bias + 6, bias + 7, bias + 8, bias + 9, bias + 10, bias + 11,
                                        bias + 12, bias + 13, bias + 14, bias + 15);
    return _mm512_permutexvar_ps(v, table);
  }
  static __m512i Indices(size_t stride) {
    const int s = static_cast<int>(stride);
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32(s));
  }
  static V Gather(const float* base, __m512i idx) { return _mm512_i32gather_ps(idx, base, 4); }
  static void ExpShift(float* v, size_t n) { ExpShift16(v, n); }
  static void Divide(float* v, size_t n, float denom) { Divide16(v, n, denom); }
};

// Decode: 2 panels (4 zmm chains). Up to 8 tokens: a panel's 2 zmm x 8
// tokens. More (prefill): pairs of panels x 6 tokens (24 accumulators,
// each broadcast feeding 4 vectors). A zmm broadcast takes an FP pipe slot
// like a mul or an add (AMD Zen 4), so feeding 2 vectors per broadcast ran
// at ~75 % of the no-FMA peak in cache and 4 per broadcast at ~86 %.
// Quantized weights: decode one panel (2 zmm chains: a Q8_0 weight costs 5
// vector ops, so the FP pipes, not the add latency, bound it; one stream
// per thread kept a Zen 5 core's DRAM reads 1.3-1.4x faster than two in
// flight); more tokens a panel's 2 zmm x 6 tokens (the dequantized weights
// feed 6 products each).
void MatmulPacked(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok,
                  float* y, size_t ys) {
  if (QuantPanelOf(w.type()) != nullptr) {
    return quant_impl::Matmul<Avx512, 1, 2, 6>(w, p0, p1, x, n_tok, y, ys);
  }
  panel_impl::MatmulPacked<Avx512, 2, 2, 8, 2, 6>(w, p0, p1, x, n_tok, y, ys);
}

// §10: out = (x / (1 + exp_pinned(-x))) * up, 16 lanes at a time.
void SiluMul16(const float* gate, const float* up, size_t n, float* out) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(gate + i);
    const __m512 neg = _mm512_castsi512_ps(  // -x: flip the sign bit
        _mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(static_cast<int>(0x80000000u))));
    const __m512 denom = _mm512_add_ps(_mm512_set1_ps(1.0f), Exp16(neg));
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(x, denom), _mm512_loadu_ps(up + i)));
  }
  SiluMul(gate + i, up + i, n - i, out + i);
}

}  // namespace

const Kernels& Avx512Kernels() {
  static const Kernels k{"avx512", &panel_impl::MatmulRowsT<Avx512>, &MatmulPacked,
                         &attention_impl::AttendScoresT<Avx512, 4, 3>,
                         &attention_impl::SoftmaxRowsT<Avx512>,
                         &attention_impl::AttendMixT<Avx512, 4, 3>, &SiluMul16};
  return k;
}

}  // namespace lockstep::ops
