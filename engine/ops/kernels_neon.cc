// NEON kernels (aarch64 only: CMake adds this file on aarch64 and nowhere
// else). -ffp-contract=off keeps vmulq_f32 and vaddq_f32 separate (no
// fmla), as the no-FMA test checks.
#include <arm_neon.h>

#include "engine/ops/attention_impl.h"
#include "engine/ops/kernels_isa.h"
#include "engine/ops/panel_matmul_impl.h"

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
  static V Mul(V a, V b) { return vmulq_f32(a, b); }
  static void Store(float* p, V v) { vst1q_f32(p, v); }
  static size_t Indices(size_t stride) { return stride; }
  static V Gather(const float* base, size_t stride) {
    const float lanes[4] = {base[0], base[stride], base[2 * stride], base[3 * stride]};
    return vld1q_f32(lanes);
  }
  static void ExpShift(float* v, size_t n) { attention_impl::ExpShiftSeq(v, n); }
  static void Divide(float* v, size_t n, float denom) { attention_impl::DivideSeq(v, n, denom); }
};

// Decode: 2 panels (16 q-register chains); prefill: 4 vectors x 4 tokens.
void MatmulPacked(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok,
                  float* y, size_t ys) {
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
