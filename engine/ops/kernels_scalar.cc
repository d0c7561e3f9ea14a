#include "engine/ops/kernels.h"

#include <algorithm>

#include "engine/ops/pinned_math.h"

namespace lockstep::ops {

float DotSeq(const float* a, const float* b, size_t n) {
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float p = a[i] * b[i];
    acc = acc + p;
  }
  return acc;
}

float SumSeq(const float* a, size_t n) {
  float acc = 0.0f;
  for (size_t i = 0; i < n; ++i) acc = acc + a[i];
  return acc;
}

void RmsNorm(const float* x, const float* weight, size_t n, float eps, float* out) {
  float ss = 0.0f;
  for (size_t i = 0; i < n; ++i) {
    const float sq = x[i] * x[i];
    ss = ss + sq;
  }
  const float mean = ss / static_cast<float>(n);
  const float inv = Rsqrt(mean + eps);
  for (size_t i = 0; i < n; ++i) {
    const float scaled = x[i] * inv;
    out[i] = scaled * weight[i];
  }
}

void SoftmaxSeq(float* v, size_t n) {
  if (n == 0) return;
  float max_v = v[0];
  for (size_t i = 1; i < n; ++i) {
    if (v[i] > max_v) max_v = v[i];
  }
  for (size_t i = 0; i < n; ++i) v[i] = ExpPinned(v[i] - max_v);
  const float denom = SumSeq(v, n);
  for (size_t i = 0; i < n; ++i) v[i] = v[i] / denom;
}

void SoftmaxRows(float* v, size_t n, size_t rows, size_t stride) {
  for (size_t r = 0; r < rows; ++r) SoftmaxSeq(v + r * stride, n);
}

void SiluMul(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float s = Silu(gate[i]);
    out[i] = s * up[i];
  }
}

void AddInPlace(float* h, const float* d, size_t n) {
  for (size_t i = 0; i < n; ++i) h[i] = h[i] + d[i];
}

uint32_t ArgmaxFirst(const float* v, size_t n) {
  size_t best = 0;
  float best_val = n > 0 ? v[0] : 0.0f;
  for (size_t i = 0; i < n; ++i) {
    if (v[i] > best_val) {
      best_val = v[i];
      best = i;
    }
  }
  return static_cast<uint32_t>(best);
}

void AttendHead(const float* q, const float* k, const float* v, size_t stride,
                size_t n_keys, size_t head_dim, float scale, float* scores, float* out) {
  for (size_t j = 0; j < n_keys; ++j) {
    const float d = DotSeq(q, k + j * stride, head_dim);
    scores[j] = d * scale;
  }
  SoftmaxSeq(scores, n_keys);
  for (size_t d = 0; d < head_dim; ++d) {
    float acc = 0.0f;
    for (size_t j = 0; j < n_keys; ++j) {
      const float p = scores[j] * v[j * stride + d];
      acc = acc + p;
    }
    out[d] = acc;
  }
}

void AttendScores(const float* q, size_t g, const float* k, size_t t0, size_t t1,
                  size_t head_dim, float scale, float* scores, size_t ss) {
  for (size_t h = 0; h < g; ++h) {
    for (size_t key = t0 * kKvTile; key < t1 * kKvTile; ++key) {
      const float* tile = k + (key / kKvTile) * head_dim * kKvTile + key % kKvTile;
      float acc = 0.0f;
      for (size_t d = 0; d < head_dim; ++d) {
        const float p = q[h * head_dim + d] * tile[d * kKvTile];
        acc = acc + p;
      }
      scores[h * ss + key] = acc * scale;
    }
  }
}

void AttendMix(const float* p, size_t g, size_t ps, const float* v, size_t lo, size_t end,
               size_t head_dim, size_t d0, size_t d1, float* out) {
  for (size_t h = 0; h < g; ++h) {
    for (size_t d = d0; d < d1; ++d) {
      float acc = 0.0f;
      for (size_t j = lo; j < end; ++j) {
        const float x = p[h * ps + j] * v[j * head_dim + d];
        acc = acc + x;
      }
      out[h * head_dim + d] = acc;
    }
  }
}

namespace {

void MatMulScalar(const float* w, size_t rows, size_t cols,
                  const float* x, size_t n_tok, float* y) {
  for (size_t t = 0; t < n_tok; ++t) {
    for (size_t r = 0; r < rows; ++r) {
      y[t * rows + r] = DotSeq(w + r * cols, x + t * cols, cols);
    }
  }
}

// The reference for packed weights: one row at a time, w[r][k] read
// through PackedMatrix::At (the §4.1 widening for bf16).
void MatmulPackedScalar(const PackedMatrix& w, size_t p0, size_t p1, const float* x,
                        size_t n_tok, float* y, size_t y_stride) {
  const size_t cols = w.cols();
  const size_t r1 = std::min(p1 * kPanelRows, w.rows());
  for (size_t t = 0; t < n_tok; ++t) {
    for (size_t r = p0 * kPanelRows; r < r1; ++r) {
      float acc = 0.0f;
      for (size_t k = 0; k < cols; ++k) {
        const float p = w.At(r, k) * x[t * cols + k];
        acc = acc + p;
      }
      y[t * y_stride + r] = acc;
    }
  }
}

}  // namespace

const Kernels& ScalarKernels() {
  static const Kernels k{"scalar", &MatMulScalar, &MatmulPackedScalar, &AttendScores,
                         &SoftmaxRows, &AttendMix, &SiluMul};
  return k;
}

}  // namespace lockstep::ops
