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
// Included by the per-ISA translation units (traits in anonymous namespaces).
#pragma once

#include <algorithm>
#include <cstddef>

#include "engine/ops/kernels.h"

namespace lockstep::ops::attention_impl {

// How many tile blocks ahead the scores loop prefetches K.
inline constexpr size_t kPrefetchBlocks = 2;

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
    for (int x = 0; x < DV; ++x) vv[x] = I::Load(v + j * hd + d + static_cast<size_t>(x) * L);
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

template <class I, int DV, int GM>
void MixHeads(const float* p, size_t g, size_t ps, const float* v, size_t lo, size_t end, size_t hd,
              size_t d0, size_t d1, float* out) {
  if constexpr (GM > 1) {
    if (g < static_cast<size_t>(GM)) return MixHeads<I, DV, GM - 1>(p, g, ps, v, lo, end, hd, d0, d1, out);
  }
  constexpr size_t L = I::kLanes;
  size_t d = d0;
  for (; d + DV * L <= d1; d += DV * L) MixBlock<I, DV, GM>(p, ps, v, lo, end, hd, d, out);
  for (; d + L <= d1; d += L) MixBlock<I, 1, GM>(p, ps, v, lo, end, hd, d, out);
  if (d < d1) AttendMix(p, static_cast<size_t>(GM), ps, v, lo, end, hd, d, d1, out);
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

}  // namespace lockstep::ops::attention_impl
