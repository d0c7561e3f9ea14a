// NEON kernels (aarch64 only: CMake adds this file on aarch64 and nowhere
// else). -ffp-contract=off keeps vmulq_f32 and vaddq_f32 separate (no
// fmla), as the no-FMA test checks.
#include <arm_neon.h>

#include <cstring>

#include "engine/ops/attention_impl.h"
#include "engine/ops/kernels_isa.h"
#include "engine/ops/panel_matmul_impl.h"
#include "engine/ops/quant_matmul_impl.h"

namespace lockstep::ops {
namespace {

struct Neon {
  using V = float32x4_t;
  static constexpr size_t kLanes = 4;
  static V Zero() { return vdupq_n_f32(0.0f); }
  static V Broadcast(float f) { return vdupq_n_f32(f); }
  static V Load(const float* p) { return vld1q_f32(p); }
  static V WidenLow(const uint16_t* p) {  // §4.1 on each word's low bf16
    return vreinterpretq_f32_u32(vshlq_n_u32(vreinterpretq_u32_u16(vld1q_u16(p)), 16));
  }
  static V WidenHigh(const uint16_t* p) {  // §4.1 on each word's high bf16
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_u16(vld1q_u16(p)), vdupq_n_u32(0xFFFF0000u)));
  }
  static V Add(V a, V b) { return vaddq_f32(a, b); }
  static V Sub(V a, V b) { return vsubq_f32(a, b); }
  static V Mul(V a, V b) { return vmulq_f32(a, b); }
  static void Store(float* p, V v) { vst1q_f32(p, v); }
  // fcvtl: exact for every half, subnormals too (conversions ignore FZ16,
  // and FZ applies to single-precision inputs only).
  static V LoadF16(const uint8_t* p) {
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const uint16_t*>(p))));
  }
  using VI = int32x4_t;
  static uint32x2_t Four(const uint8_t* p) {
    uint32_t w;
    std::memcpy(&w, p, 4);
    return vdup_n_u32(w);
  }
  static VI LoadU8(const uint8_t* p) {
    return vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(Four(p))))));
  }
  static VI LoadI8(const uint8_t* p) {
    return vmovl_s16(vget_low_s16(vmovl_s8(vreinterpret_s8_u32(Four(p)))));
  }
  static V ToF32(VI v) { return vcvtq_f32_s32(v); }
  template <int n>
  static VI Srl(VI v) { return vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(v), n)); }
  template <int n>
  static VI Sll(VI v) { return vshlq_n_s32(v, n); }
  static VI And(VI v, int mask) { return vandq_s32(v, vdupq_n_s32(mask)); }
  static VI Or(VI a, VI b) { return vorrq_s32(a, b); }
  static VI SubI(VI v, int n) { return vsubq_s32(v, vdupq_n_s32(n)); }
  template <int bias>
  static V Nib(VI v) {  // f32((v & 15) + bias)
    const VI q = And(v, 15);
    if constexpr (bias == 0) return ToF32(q);
    else return ToF32(vaddq_s32(q, vdupq_n_s32(bias)));
  }
  static size_t Indices(size_t stride) { return stride; }
  static V Gather(const float* base, size_t stride) {
    const float lanes[4] = {base[0], base[stride], base[2 * stride], base[3 * stride]};
    return vld1q_f32(lanes);
  }
  static void ExpShift(float* v, size_t n) { attention_impl::ExpShiftSeq(v, n); }
  static void Divide(float* v, size_t n, float denom) { attention_impl::DivideSeq(v, n, denom); }
};

// Decode: 2 panels (16 q-register chains); prefill: 4 vectors x 4 tokens.
// Quantized weights: decode 1 panel (8 sums, 8 D and 8 M vectors); more
// tokens 4 vectors x 4 tokens.
void MatmulPacked(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok,
                  float* y, size_t ys) {
  if (QuantPanelOf(w.type()) != nullptr) {
    return quant_impl::Matmul<Neon, 1, 4, 4>(w, p0, p1, x, n_tok, y, ys);
  }
  panel_impl::MatmulPacked<Neon, 2, 4, 4>(w, p0, p1, x, n_tok, y, ys);
}

}  // namespace

const Kernels& NeonKernels() {
  static const Kernels k{"neon", &panel_impl::MatmulRowsT<Neon>, &MatmulPacked,
                         &attention_impl::AttendScoresT<Neon, 1, 3>,
                         &attention_impl::SoftmaxRowsT<Neon>,
                         &attention_impl::AttendMixT<Neon, 4, 3>, &SiluMul};
  return k;
}

}  // namespace lockstep::ops
