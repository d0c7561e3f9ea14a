// The panel matmul algorithm, written once over an ISA "traits" type I:
//   I::V, I::kLanes, Zero(), Broadcast(f), Load(const float*),
//   WidenLow(const uint16_t*) / WidenHigh(const uint16_t*) (kLanes 32-bit
//   words, each word's low / high bf16 widened by §4.1: `w << 16` /
//   `w & 0xFFFF0000`), LoadF16(const uint8_t*) (kLanes f16 widened
//   exactly, subnormal halves included whatever DAZ says), Add, Mul, Store,
//   and for the row-major `matmul` slot Indices/Gather.
// Each lane owns one row and sums it strictly in k order (mul, then add:
// two roundings, §5.1); several panels/tokens are in flight to hide the add
// latency. Included by the per-ISA translation units, whose traits types
// live in anonymous namespaces so every instantiation is local to its TU.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/ops/kernels.h"
#include "engine/ops/packed_matrix.h"

namespace lockstep::ops::panel_impl {

// How far ahead a tile prefetches its panels (a k-row is one 64-byte line
// of bf16, two of f32; a prefetch past the end is harmless). Decode keeps
// two panels in flight 32 k steps ahead. A multi-token tile reads one
// panel at ~9 cycles per k-row (8 tokens), ~20 GB/s per core of bf16: its
// single stream needs 4 KB ahead to keep as many lines in flight.
inline constexpr size_t kPrefetchK = 32;
inline constexpr size_t kPrefetchTileBytes = 4096;

// Rows [v*L, (v+1)*L) of a panel's k-row as f32.
template <class I, int v>
inline typename I::V LoadRows(const float* krow) {
  return I::Load(krow + v * I::kLanes);
}
// bf16 (Bf16Slot order): word vector v gives rows v*L.. by its low halves,
// word vector v - H rows 16 + (v - H)*L.. by its high halves.
template <class I, int v>
inline typename I::V LoadRows(const uint16_t* krow) {
  constexpr int H = static_cast<int>(kPanelRows / 2 / I::kLanes);
  if constexpr (v < H) return I::WidenLow(krow + 2 * v * I::kLanes);
  else return I::WidenHigh(krow + 2 * (v - H) * I::kLanes);
}

// An f16 element of a kF16 panel (rows in order within a k-row).
struct Half {
  uint16_t bits;
};
template <class I, int v>
inline typename I::V LoadRows(const Half* krow) {
  return I::LoadF16(reinterpret_cast<const uint8_t*>(krow + v * I::kLanes));
}

// acc[p][v][t] += w(p, V0 + v) * x[t][k] for one k: mul, then add.
template <class I, class T, int NP, int RV, int NT, int V0, int v>
inline void TileStep(typename I::V (&acc)[NP][RV][NT], const T* const* panels, size_t k,
                     const typename I::V (&xb)[NT]) {
#pragma GCC unroll 16
  for (int p = 0; p < NP; ++p) {
    const typename I::V w = LoadRows<I, V0 + v>(panels[p] + k * kPanelRows);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) acc[p][v][t] = I::Add(acc[p][v][t], I::Mul(w, xb[t]));
  }
  if constexpr (v + 1 < RV) TileStep<I, T, NP, RV, NT, V0, v + 1>(acc, panels, k, xb);
}

// Rows [V0*L, (V0+RV)*L) of NP panels for NT tokens into
// tmp[p][t][kPanelRows]. x: token t at x + t*xs.
template <class I, class T, int NP, int RV, int NT, int V0>
inline void Tile(const T* const* panels, size_t cols, const float* x, size_t xs, float* tmp) {
  using V = typename I::V;
  constexpr size_t L = I::kLanes;
  V acc[NP][RV][NT];  // fully unrolled below, so it lives in registers
#pragma GCC unroll 16
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 16
    for (int v = 0; v < RV; ++v)
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) acc[p][v][t] = I::Zero();
  for (size_t k = 0; k < cols; ++k) {
    {  // weights stream from DRAM (decode, and a batch's or prefill's first pass): fetch ahead
#pragma GCC unroll 16
      for (int p = 0; p < NP; ++p) {
        constexpr size_t kAhead = NT == 1 ? kPrefetchK : kPrefetchTileBytes / (kPanelRows * sizeof(T));
        const char* ahead = reinterpret_cast<const char*>(panels[p] + (k + kAhead) * kPanelRows);
#pragma GCC unroll 4
        for (size_t off = 0; off < kPanelRows * sizeof(T); off += 64) __builtin_prefetch(ahead + off, 0, 3);
      }
    }
    V xb[NT];
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) xb[t] = I::Broadcast(x[t * xs + k]);
    TileStep<I, T, NP, RV, NT, V0, 0>(acc, panels, k, xb);
  }
#pragma GCC unroll 16
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 16
      for (int v = 0; v < RV; ++v)
        I::Store(tmp + (p * NT + t) * kPanelRows + (V0 + v) * L, acc[p][v][t]);
}

inline const float* PanelOf(const PackedMatrix& w, size_t p, const float*) {
  return w.f32_panel(p);
}
inline const uint16_t* PanelOf(const PackedMatrix& w, size_t p, const uint16_t*) {
  return w.bf16_panel(p);
}
inline const Half* PanelOf(const PackedMatrix& w, size_t p, const Half*) {
  return reinterpret_cast<const Half*>(w.f16_panel(p));
}

// Copies the valid rows of tmp[p][t][kPanelRows] (panels p0.., NT tokens).
inline void Scatter(const PackedMatrix& w, size_t p0, int np, int nt, const float* tmp,
                    float* y, size_t ys) {
  for (int p = 0; p < np; ++p) {
    const size_t r0 = (p0 + static_cast<size_t>(p)) * kPanelRows;
    const size_t n = std::min(kPanelRows, w.rows() - r0);
    for (int t = 0; t < nt; ++t) {
      std::memcpy(y + static_cast<size_t>(t) * ys + r0, tmp + (p * nt + t) * kPanelRows,
                  n * sizeof(float));
    }
  }
}

// One token (decode): NP panels in flight, every vector of the panel.
template <class I, class T, int NP>
inline void DecodePanels(const PackedMatrix& w, size_t p, const float* x, float* y) {
  constexpr int RV = static_cast<int>(kPanelRows / I::kLanes);
  const T* panels[NP];
  for (int i = 0; i < NP; ++i) panels[i] = PanelOf(w, p + static_cast<size_t>(i), static_cast<const T*>(nullptr));
  alignas(64) float tmp[NP * kPanelRows];
  Tile<I, T, NP, RV, 1, 0>(panels, w.cols(), x, w.cols(), tmp);
  Scatter(w, p, NP, 1, tmp, y, 0);
}

// Vectors [V0, V0 + RV), [V0 + RV, ...) of one panel's rows for NT tokens.
template <class I, class T, int RV, int NT, int V0>
inline void PanelPasses(const T* const* panel, size_t cols, const float* x, float* tmp) {
  static_assert(kPanelRows / I::kLanes % RV == 0, "RV vectors must tile a panel");
  Tile<I, T, 1, RV, NT, V0>(panel, cols, x, cols, tmp);
  if constexpr (V0 + RV < static_cast<int>(kPanelRows / I::kLanes)) {
    PanelPasses<I, T, RV, NT, V0 + RV>(panel, cols, x, tmp);
  }
}

// NT tokens of one panel, RV vectors at a time.
template <class I, class T, int RV, int NT>
inline void PrefillPanel(const PackedMatrix& w, size_t p, const float* x, float* y, size_t ys) {
  const T* panel[1] = {PanelOf(w, p, static_cast<const T*>(nullptr))};
  alignas(64) float tmp[NT * kPanelRows];
  PanelPasses<I, T, RV, NT, 0>(panel, w.cols(), x, tmp);
  Scatter(w, p, 1, NT, tmp, y, ys);
}

// Calls tile.template operator()<rem>() for a run-time 1 <= rem <= NT: the
// tail of a token loop, as a tile of exactly its size.
template <int NT, class F>
inline void WithTokenCount(size_t rem, F&& tile) {
  if constexpr (NT > 1) {
    if (rem < static_cast<size_t>(NT)) return WithTokenCount<NT - 1>(rem, tile);
  }
  tile.template operator()<NT>();
}

// NT tokens of NP whole panels in one tile: each broadcast x value feeds
// NP * kPanelRows / L lanes' vectors, not one panel's. Where the
// broadcasts share the FP pipes with the muls and adds, that is what keeps
// a several-token matmul near the no-FMA peak.
template <class I, class T, int NP, int NT>
inline void PanelsTile(const PackedMatrix& w, size_t p, const float* x, float* y, size_t ys) {
  constexpr int RV = static_cast<int>(kPanelRows / I::kLanes);
  const T* panels[NP];
  for (int i = 0; i < NP; ++i) panels[i] = PanelOf(w, p + static_cast<size_t>(i), static_cast<const T*>(nullptr));
  alignas(64) float tmp[NP * NT * kPanelRows];
  Tile<I, T, NP, RV, NT, 0>(panels, w.cols(), x, w.cols(), tmp);
  Scatter(w, p, NP, NT, tmp, y, ys);
}

// n_tok tokens of panels [p, p + NP): tiles of NT tokens, then the rest.
template <class I, class T, int NP, int NT>
inline void PanelsAllTokens(const PackedMatrix& w, size_t p, const float* x, size_t n_tok,
                            float* y, size_t ys) {
  const size_t cols = w.cols();
  size_t t = 0;
  for (; t + NT <= n_tok; t += NT) PanelsTile<I, T, NP, NT>(w, p, x + t * cols, y + t * ys, ys);
  if constexpr (NT > 1) {
    if (t < n_tok) {
      WithTokenCount<NT - 1>(n_tok - t, [&]<int K>() {
        PanelsTile<I, T, NP, K>(w, p, x + t * cols, y + t * ys, ys);
      });
    }
  }
}

// The kernel-table entry: I's decode shape (NPD panels), prefill shape
// (RVP vectors x NTP tokens) and, if NPP > 1, the shape for more than NTP
// tokens: whole groups of NPP panels x NTPP tokens (a range's leftover
// panels take the prefill shape). Up to NTP tokens stay in one pass over
// each panel: a second pass over panels already in cache leaves the memory
// idle while it runs, which costs a weight-streaming batch more than the
// broadcasts it saves.
template <class I, class T, int NPD, int RVP, int NTP, int NPP = 1, int NTPP = 1>
void MatmulPackedT(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok,
                   float* y, size_t ys) {
  const size_t cols = w.cols();
  if (n_tok == 1) {
    size_t p = p0;
    for (; p + NPD <= p1; p += NPD) DecodePanels<I, T, NPD>(w, p, x, y);
    for (; p < p1; ++p) DecodePanels<I, T, 1>(w, p, x, y);
    return;
  }
  if constexpr (NPP > 1) {
    static_assert(RVP == static_cast<int>(kPanelRows / I::kLanes), "NPP tiles take whole panels");
    if (n_tok > static_cast<size_t>(NTP)) {  // else one pass streams each panel once
      for (; p0 + NPP <= p1; p0 += NPP) PanelsAllTokens<I, T, NPP, NTPP>(w, p0, x, n_tok, y, ys);
    }
  }
  for (size_t p = p0; p < p1; ++p) {
    size_t t = 0;
    for (; t + NTP <= n_tok; t += NTP) {
      PrefillPanel<I, T, RVP, NTP>(w, p, x + t * cols, y + t * ys, ys);
    }
    if constexpr (NTP > 1) {
      if (t < n_tok) {
        WithTokenCount<NTP - 1>(n_tok - t, [&]<int K>() {
          PrefillPanel<I, T, RVP, K>(w, p, x + t * cols, y + t * ys, ys);
        });
      }
    }
  }
}

// kF32, kBf16 and kF16 (quantized types: quant_matmul_impl.h).
template <class I, int NPD, int RVP, int NTP, int NPP = 1, int NTPP = 1>
void MatmulPacked(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok,
                  float* y, size_t ys) {
  if (w.type() == WeightType::kF32) {
    MatmulPackedT<I, float, NPD, RVP, NTP, NPP, NTPP>(w, p0, p1, x, n_tok, y, ys);
  } else if (w.type() == WeightType::kBf16) {
    MatmulPackedT<I, uint16_t, NPD, RVP, NTP, NPP, NTPP>(w, p0, p1, x, n_tok, y, ys);
  } else {
    MatmulPackedT<I, Half, NPD, RVP, NTP, NPP, NTPP>(w, p0, p1, x, n_tok, y, ys);
  }
}

// Row-major y[t][r] = dot_seq(w[r], x[t]) (the `matmul` slot): one row
// per lane, the lane's elements gathered with stride cols.
template <class I>
void MatmulRowsT(const float* w, size_t rows, size_t cols, const float* x, size_t n_tok,
                 float* y) {
  constexpr size_t L = I::kLanes;
  const auto idx = I::Indices(cols);
  for (size_t t = 0; t < n_tok; ++t) {
    const float* xt = x + t * cols;
    size_t r = 0;
    for (; r + L <= rows; r += L) {
      typename I::V acc = I::Zero();
      for (size_t k = 0; k < cols; ++k) {
        acc = I::Add(acc, I::Mul(I::Gather(w + r * cols + k, idx), I::Broadcast(xt[k])));
      }
      I::Store(y + t * rows + r, acc);
    }
    for (; r < rows; ++r) y[t * rows + r] = DotSeq(w + r * cols, xt, cols);
  }
}

}  // namespace lockstep::ops::panel_impl
