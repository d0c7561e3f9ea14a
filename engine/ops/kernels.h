// The kernel boundary: every numeric kernel the forward pass uses, as a
// table of function pointers, so fast per-ISA versions can stand beside
// the plain scalar reference (ScalarKernels()) and be chosen at run time.
//
// Contract shared by every implementation of a slot: the result is
// bit-identical to the scalar reference for every input. Reductions run in
// the exact order of CIS-2 §5 (sequential, separate mul then add); only
// independent outputs (rows, tokens, lanes) may be reordered or run in
// parallel. Kernels are stateless and thread-safe; pointers may be
// unaligned; outputs never alias inputs unless stated.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/ops/packed_matrix.h"

namespace lockstep::ops {

// Keys per tile of the attention K layout (KvCache, attend_scores).
inline constexpr size_t kKvTile = 16;

struct Kernels {
  const char* name;
  // y[t][r] = dot_seq(w[r][:], x[t][:]) for t < n_tok, r < rows (§5.2).
  // w: [rows][cols]; x: [n_tok][cols]; y: [n_tok][rows].
  void (*matmul)(const float* w, size_t rows, size_t cols,
                 const float* x, size_t n_tok, float* y);
  // The same product over a PackedMatrix of any WeightType (w[r][k] is
  // PackedMatrix::At: bf16/f16 widened, quantized weights E2.3's value),
  // for the rows of panels [p0, p1) only:
  // y[t*y_stride + r] = dot_seq(w[r][:], x[t][:]) for t < n_tok and
  // p0*kPanelRows <= r < min(p1*kPanelRows, rows).
  // x: [n_tok][w.cols()]. Disjoint panel ranges may run on different threads.
  void (*matmul_packed)(const PackedMatrix& w, size_t p0, size_t p1, const float* x,
                        size_t n_tok, float* y, size_t y_stride);
  // §9.2 over the tiled K of one kv head (KvCache's layout, kKvTile keys
  // per tile, lane = key) for the g query heads that share it:
  // scores[h*ss + t*kKvTile + i] = dot_seq(q[h], key t*kKvTile + i) * scale
  // for tiles t0 <= t < t1 and every lane i (padding lanes included; the
  // caller ignores them). q: [g][head_dim]; k: [tiles][head_dim][kKvTile].
  void (*attend_scores)(const float* q, size_t g, const float* k, size_t t0, size_t t1,
                        size_t head_dim, float scale, float* scores, size_t ss);
  // §9.3 SoftmaxSeq (below) in place on each of `rows` rows of n values,
  // row r at v + r*stride; exp and division may run in lanes, the sums of
  // different rows interleaved (each one still sequential).
  void (*softmax_rows)(float* v, size_t n, size_t rows, size_t stride);
  // §9.4 for g heads over rows v: [keys][head_dim] of one kv head:
  // out[h*head_dim + d] = sum over j in [lo, end), sequential in j, of
  // p[h*ps + j] * v[j*head_dim + d], for d0 <= d < d1.
  void (*attend_mix)(const float* p, size_t g, size_t ps, const float* v, size_t lo, size_t end,
                     size_t head_dim, size_t d0, size_t d1, float* out);
  // SiluMul (below), elementwise; a SIMD version must reproduce the pinned
  // exp (§6.2) and SiLU (§6.4) bit for bit in every lane.
  void (*silu_mul)(const float* gate, const float* up, size_t n, float* out);
};

// §5.1 / §5.3 reference reductions.
float DotSeq(const float* a, const float* b, size_t n);
float SumSeq(const float* a, size_t n);

// §8 RMSNorm: out[i] = (x[i] * inv) * weight[i]; out may alias x.
void RmsNorm(const float* x, const float* weight, size_t n, float eps, float* out);
// §9.3 softmax in place, first-occurrence max, division by the sum.
void SoftmaxSeq(float* v, size_t n);
// The reference of softmax_rows: SoftmaxSeq on each row.
void SoftmaxRows(float* v, size_t n, size_t rows, size_t stride);
// §10: out[i] = silu(gate[i]) * up[i]; out may alias gate.
void SiluMul(const float* gate, const float* up, size_t n, float* out);
// §5.4: h[i] = h[i] + d[i].
void AddInPlace(float* h, const float* d, size_t n);
// §11.2: first index of the maximum (strict >).
uint32_t ArgmaxFirst(const float* v, size_t n);

// §9.2-9.4 for one query head over n_keys row-major cached rows (the
// spec's shape; tests check the tiled kernels against it):
// scores[j] = dot_seq(q, k_j) * scale; softmax; out[d] = Σ_j scores[j]*v_j[d]
// (sequential in j). k/v rows start at k/v and are `stride` floats apart.
// scores: scratch of n_keys floats. out: [head_dim].
void AttendHead(const float* q, const float* k, const float* v, size_t stride,
                size_t n_keys, size_t head_dim, float scale, float* scores, float* out);

// The scalar references of attend_scores and attend_mix (same contracts).
void AttendScores(const float* q, size_t g, const float* k, size_t t0, size_t t1,
                  size_t head_dim, float scale, float* scores, size_t ss);
void AttendMix(const float* p, size_t g, size_t ps, const float* v, size_t lo, size_t end,
               size_t head_dim, size_t d0, size_t d1, float* out);

// The plain scalar reference table.
const Kernels& ScalarKernels();

}  // namespace lockstep::ops
