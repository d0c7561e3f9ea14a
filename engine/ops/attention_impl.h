// The tiled attention kernels (attend_scores, attend_mix of kernels.h),
// written once over an ISA traits type I (I::V, kLanes, Zero, Broadcast,
// Load, Add, Mul, Store; see panel_matmul_impl.h) with kKvTile % kLanes == 0.
//
// Scores: lane = key. A K tile holds head_dim rows of kKvTile consecutive
// keys, so every load is contiguous; each lane sums q[d] * k[d] for
// d = 0, 1, ... (mul, then add, §5.1) and is scaled at the end — the
// per-key order of DotSeq. Up to GM query heads share every K load.
// Mix: lane = head dim; each lane sums p_j * v_j[d] for j = lo, lo+1, ...
// Up to GM heads share every V load. Several accumulators are in flight
// to hide the add latency; none of them ever holds a partial of another.
// Softmax rows: I::ExpShift(row, n) (SoftmaxSeq's max, then exp(x - max)
// in place) and I::Divide(row, n, denom) per row; the sums of up to
// kSumRows rows run interleaved, each sequential.
// Included by the per-ISA translation units (traits in anonymous namespaces).
#pragma once

#include <algorithm>
#include <cstddef>

#include "engine/ops/kernels.h"
#include "engine/ops/pinned_math.h"

namespace lockstep::ops::attention_impl {

// How many tile blocks ahead the scores loop prefetches K, and how many
// keys ahead the mix prefetches V.
inline constexpr size_t kPrefetchBlocks = 2;
inline constexpr size_t kPrefetchKeys = 16;

// Scores of G heads for NT whole tiles starting at tile t.
template <class I, int NT, int G>
inline void ScoreTiles(const float* q, size_t hd, const float* k, size_t t, float scale,
                       float* scores, size_t ss) {
  using V = typename I::V;
  constexpr size_t L = I::kLanes, VT = kKvTile / L;  // vectors per tile row
  constexpr int NV = NT * static_cast<int>(VT);
  const size_t tile_floats = hd * kKvTile;
  const float* base = k + t * tile_floats;
  V acc[G][NV];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) acc[g][v] = I::Zero();
  for (size_t d = 0; d < hd; ++d) {
    V kv[NV];
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      const float* row = base + static_cast<size_t>(v / static_cast<int>(VT)) * tile_floats + d * kKvTile;
      if (v % static_cast<int>(VT) == 0) {
        __builtin_prefetch(row + kPrefetchBlocks * NT * tile_floats, 0, 3);
      }
      kv[v] = I::Load(row + static_cast<size_t>(v % static_cast<int>(VT)) * L);
    }
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const V qb = I::Broadcast(q[static_cast<size_t>(g) * hd + d]);
#pragma GCC unroll 16
      for (int v = 0; v < NV; ++v) acc[g][v] = I::Add(acc[g][v], I::Mul(qb, kv[v]));
    }
  }
  const V vscale = I::Broadcast(scale);
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int v = 0; v < NV; ++v) {
      float* out = scores + static_cast<size_t>(g) * ss + t * kKvTile +
                   static_cast<size_t>(v / static_cast<int>(VT)) * kKvTile +
                   static_cast<size_t>(v % static_cast<int>(VT)) * L;
      I::Store(out, I::Mul(acc[g][v], vscale));
    }
}

// G (<= GM, chosen at run time) heads over tiles [t0, t1), NT at a time.
template <class I, int NT, int GM>
void ScoreHeads(const float* q, size_t g, size_t hd, const float* k, size_t t0, size_t t1,
                float scale, float* scores, size_t ss) {
  if constexpr (GM > 1) {
    if (g < static_cast<size_t>(GM)) return ScoreHeads<I, NT, GM - 1>(q, g, hd, k, t0, t1, scale, scores, ss);
  }
  size_t t = t0;
  for (; t + NT <= t1; t += NT) ScoreTiles<I, NT, GM>(q, hd, k, t, scale, scores, ss);
  for (; t < t1; ++t) ScoreTiles<I, 1, GM>(q, hd, k, t, scale, scores, ss);
}

// The attend_scores slot: NT tiles x up to GM heads per pass over K.
template <class I, int NT, int GM>
void AttendScoresT(const float* q, size_t g, const float* k, size_t t0, size_t t1, size_t hd,
                   float scale, float* scores, size_t ss) {
  for (size_t h = 0; h < g; h += GM) {
    const size_t n = std::min(g - h, static_cast<size_t>(GM));
    ScoreHeads<I, NT, GM>(q + h * hd, n, hd, k, t0, t1, scale, scores + h * ss, ss);
  }
}

// out[g][d .. d + DV*L) for G heads over keys [lo, end).
template <class I, int DV, int G>
inline void MixBlock(const float* p, size_t ps, const float* v, size_t lo, size_t end, size_t hd,
                     size_t d, float* out) {
  using V = typename I::V;
  constexpr size_t L = I::kLanes;
  V acc[G][DV];
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int x = 0; x < DV; ++x) acc[g][x] = I::Zero();
  for (size_t j = lo; j < end; ++j) {
    V vv[DV];
#pragma GCC unroll 16
    for (int x = 0; x < DV; ++x) {
      const float* at = v + j * hd + d + static_cast<size_t>(x) * L;
      if ((static_cast<size_t>(x) * L) % 16 == 0) __builtin_prefetch(at + kPrefetchKeys * hd, 0, 3);
      vv[x] = I::Load(at);
    }
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      const V pb = I::Broadcast(p[static_cast<size_t>(g) * ps + j]);
#pragma GCC unroll 16
      for (int x = 0; x < DV; ++x) acc[g][x] = I::Add(acc[g][x], I::Mul(pb, vv[x]));
    }
  }
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g)
#pragma GCC unroll 16
    for (int x = 0; x < DV; ++x) I::Store(out + static_cast<size_t>(g) * hd + d + static_cast<size_t>(x) * L, acc[g][x]);
}

// Dims [d0, d1) of G heads: blocks of DV vectors, then of DV / 2, ... so
// a range narrower than DV vectors (decode splits a head's dims between
// threads) still reads each V row once, with as many accumulators as fit;
// the last dims (fewer than a vector) as the scalar AttendMix does.
template <class I, int DV, int G>
void MixDims(const float* p, size_t ps, const float* v, size_t lo, size_t end, size_t hd,
             size_t d0, size_t d1, float* out) {
  constexpr size_t L = I::kLanes;
  size_t d = d0;
  for (; d + DV * L <= d1; d += DV * L) MixBlock<I, DV, G>(p, ps, v, lo, end, hd, d, out);
  if constexpr (DV > 1) {
    MixDims<I, DV / 2, G>(p, ps, v, lo, end, hd, d, d1, out);
  } else if (d < d1) {
    AttendMix(p, static_cast<size_t>(G), ps, v, lo, end, hd, d, d1, out);
  }
}

template <class I, int DV, int GM>
void MixHeads(const float* p, size_t g, size_t ps, const float* v, size_t lo, size_t end, size_t hd,
              size_t d0, size_t d1, float* out) {
  if constexpr (GM > 1) {
    if (g < static_cast<size_t>(GM)) return MixHeads<I, DV, GM - 1>(p, g, ps, v, lo, end, hd, d0, d1, out);
  }
  MixDims<I, DV, GM>(p, ps, v, lo, end, hd, d0, d1, out);
}

// The attend_mix slot: DV vectors of dims x up to GM heads per pass over V.
template <class I, int DV, int GM>
void AttendMixT(const float* p, size_t g, size_t ps, const float* v, size_t lo, size_t end,
                size_t hd, size_t d0, size_t d1, float* out) {
  for (size_t h = 0; h < g; h += GM) {
    const size_t n = std::min(g - h, static_cast<size_t>(GM));
    MixHeads<I, DV, GM>(p + h * ps, n, ps, v, lo, end, hd, d0, d1, out + h * hd);
  }
}

// SoftmaxSeq's first two steps, one lane at a time (for traits without
// a vector exp).
inline void ExpShiftSeq(float* v, size_t n) {
  float max_v = v[0];
  for (size_t i = 1; i < n; ++i) {
    if (v[i] > max_v) max_v = v[i];
  }
  for (size_t i = 0; i < n; ++i) v[i] = ExpPinned(v[i] - max_v);
}

inline void DivideSeq(float* v, size_t n, float denom) {
  for (size_t i = 0; i < n; ++i) v[i] = v[i] / denom;
}

inline constexpr size_t kSumRows = 4;

// denom[r] = SumSeq(row r) for R rows, the R chains interleaved.
template <int R>
inline void SumRows(const float* v, size_t n, size_t stride, float* denom) {
  float acc[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r] = 0.0f;
  for (size_t i = 0; i < n; ++i) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[r] = acc[r] + v[static_cast<size_t>(r) * stride + i];
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) denom[r] = acc[r];
}

// The softmax_rows slot.
template <class I>
void SoftmaxRowsT(float* v, size_t n, size_t rows, size_t stride) {
  if (n == 0) return;
  for (size_t r0 = 0; r0 < rows; r0 += kSumRows) {
    const size_t count = std::min(kSumRows, rows - r0);
    float* first = v + r0 * stride;
    for (size_t r = 0; r < count; ++r) I::ExpShift(first + r * stride, n);
    float denom[kSumRows];
    switch (count) {
      case 1: SumRows<1>(first, n, stride, denom); break;
      case 2: SumRows<2>(first, n, stride, denom); break;
      case 3: SumRows<3>(first, n, stride, denom); break;
      default: SumRows<4>(first, n, stride, denom); break;
    }
    for (size_t r = 0; r < count; ++r) I::Divide(first + r * stride, n, denom[r]);
  }
}

}  // namespace lockstep::ops::attention_impl
