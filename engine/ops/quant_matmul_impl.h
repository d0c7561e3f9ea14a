// The panel matmul over quantized weights (quant_panel.h), written once
// over an ISA traits type I (panel_matmul_impl.h's, plus 32-bit integer
// lanes I::VI: LoadU8 / LoadI8 (kLanes bytes, zero / sign extended),
// LoadF16 (kLanes halves, exact, subnormals kept whatever DAZ says),
// ToF32, Srl<n>, Sll<n>, And(v, mask), Or, SubI(v, n), Sub, and
// Nib<bias>(v) = f32((v & 15) + bias)) and a type traits type (below).
//
// Each lane owns one row. Per sub-block the lanes' scale vectors are made
// once (D = f16(d) * f32(sc), M = f16(dmin) * f32(m): exact products);
// per k each lane's quant becomes f32(q) exactly, then E2.3's operations
// in E2.3's order give the weight, which is multiplied by x and added to
// the row's sum (§5.1: separate mul and add, k in order). So every lane
// computes exactly what QuantPanelValue, hence the scalar reference, does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "engine/ops/panel_matmul_impl.h"
#include "engine/ops/quant_panel.h"

namespace lockstep::ops::quant_impl {

// How far ahead of the k it reads a tile prefetches its panels' streams:
// each panel is one contiguous stream (heads and groups), fetched line by
// line from a cursor that stays this far ahead of the sub-block in use.
// A decoding Zen 5 core consumes ~20 GB/s of Q8_0 panel: 4 KB is ~200 ns
// of it, past the DRAM latency (1 KB was not).
inline constexpr size_t kPrefetchBytes = 4096;

// Scale vectors of RV lane vectors.
template <class I, int RV>
struct Scales {
  typename I::V d[RV];
  typename I::V m[RV];
};

// The first row of lane vector v of a tile whose first vector is V0.
template <class I, int V0, int v>
constexpr size_t Row() {
  return static_cast<size_t>(V0 + v) * I::kLanes;
}

// Bits [at, at + width) of each lane moved to bits [4, 4 + width).
template <class I, int at, int width>
inline typename I::VI Field(typename I::VI v) {
  constexpr int mask = ((1 << width) - 1) << 4;
  if constexpr (at <= 4) {
    return I::And(I::template Sll<4 - at>(v), mask);
  } else {
    return I::And(I::template Srl<at - 4>(v), mask);
  }
}

// The nibble of k-step s of a group (low nibble of its nibble row's byte
// for even s, high for odd), bits above it left as they are for even s.
template <class I, int s>
inline typename I::VI RawNibble(const uint8_t* group, size_t row) {
  const typename I::VI u = I::LoadU8(group + kPanelRows * (s / 2) + row);
  if constexpr (s % 2 == 1) {
    return I::template Srl<4>(u);
  } else {
    return u;
  }
}
template <class I, int s>
inline typename I::VI CleanNibble(const uint8_t* group, size_t row) {
  if constexpr (s % 2 == 1) {
    return RawNibble<I, s>(group, row);
  } else {
    return I::And(RawNibble<I, s>(group, row), 15);
  }
}

// Type traits: kPanel; LoadScales<I, RV, V0>(head, sub-block j, scales);
// Weight<I, RV, V0, v, s>(group, scales): lane vector v's weights at k-step
// s of a group.
struct Q8_0 {
  static constexpr QuantPanel kPanel = kQ8_0Panel;
  template <class I, int RV, int V0>
  static void LoadScales(const uint8_t* head, size_t, Scales<I, RV>& sc) {
    for (int v = 0; v < RV; ++v) sc.d[v] = I::LoadF16(head + 2 * (V0 + v) * I::kLanes);
  }
  template <class I, int RV, int V0, int v, int s>
  static typename I::V Weight(const uint8_t* group, const Scales<I, RV>& sc) {
    return I::Mul(I::ToF32(I::LoadI8(group + Row<I, V0, v>())), sc.d[v]);  // f32(qs) * f16(d)
  }
};

struct Q4_0 {
  static constexpr QuantPanel kPanel = kQ4_0Panel;
  template <class I, int RV, int V0>
  static void LoadScales(const uint8_t* head, size_t j, Scales<I, RV>& sc) {
    Q8_0::LoadScales<I, RV, V0>(head, j, sc);
  }
  template <class I, int RV, int V0, int v, int s>
  static typename I::V Weight(const uint8_t* group, const Scales<I, RV>& sc) {
    const typename I::V q = I::template Nib<-8>(RawNibble<I, s>(group, Row<I, V0, v>()));
    return I::Mul(sc.d[v], q);  // f16(d) * f32(q - 8)
  }
};

// Q4_K and Q5_K's scales: D = f16(d) * f32(sc_j), M = f16(dmin) * f32(m_j).
template <class I, int RV, int V0>
inline void LoadK4Scales(const uint8_t* head, size_t j, Scales<I, RV>& sc) {
  for (int v = 0; v < RV; ++v) {
    const size_t row = static_cast<size_t>(V0 + v) * I::kLanes;
    sc.d[v] = I::Mul(I::LoadF16(head + 2 * row), I::ToF32(I::LoadU8(head + kHeadSc + kPanelRows * j + row)));
    sc.m[v] = I::Mul(I::LoadF16(head + kHeadDmin + 2 * row),
                     I::ToF32(I::LoadU8(head + kHeadM + kPanelRows * j + row)));
  }
}

struct Q4_K {
  static constexpr QuantPanel kPanel = kQ4_KPanel;
  template <class I, int RV, int V0>
  static void LoadScales(const uint8_t* head, size_t j, Scales<I, RV>& sc) {
    LoadK4Scales<I, RV, V0>(head, j, sc);
  }
  template <class I, int RV, int V0, int v, int s>
  static typename I::V Weight(const uint8_t* group, const Scales<I, RV>& sc) {
    const typename I::V q = I::template Nib<0>(RawNibble<I, s>(group, Row<I, V0, v>()));
    return I::Sub(I::Mul(sc.d[v], q), sc.m[v]);  // (D * f32(q)) - M
  }
};

struct Q5_K {
  static constexpr QuantPanel kPanel = kQ5_KPanel;
  template <class I, int RV, int V0>
  static void LoadScales(const uint8_t* head, size_t j, Scales<I, RV>& sc) {
    LoadK4Scales<I, RV, V0>(head, j, sc);
  }
  template <class I, int RV, int V0, int v, int s>
  static typename I::V Weight(const uint8_t* group, const Scales<I, RV>& sc) {
    constexpr size_t row = Row<I, V0, v>();
    const typename I::VI high = Field<I, s, 1>(I::LoadU8(group + 4 * kPanelRows + row));
    const typename I::V q = I::ToF32(I::Or(CleanNibble<I, s>(group, row), high));
    return I::Sub(I::Mul(sc.d[v], q), sc.m[v]);  // (D * f32(q)) - M
  }
};

struct Q6_K {
  static constexpr QuantPanel kPanel = kQ6_KPanel;
  template <class I, int RV, int V0>
  static void LoadScales(const uint8_t* head, size_t j, Scales<I, RV>& sc) {
    for (int v = 0; v < RV; ++v) {  // D = f16(d) * f32(sc[j])
      const size_t row = static_cast<size_t>(V0 + v) * I::kLanes;
      const typename I::V s = I::ToF32(I::LoadI8(head + kHeadSc6 + kPanelRows * j + row));
      sc.d[v] = I::Mul(I::LoadF16(head + 2 * row), s);
    }
  }
  template <class I, int RV, int V0, int v, int s>
  static typename I::V Weight(const uint8_t* group, const Scales<I, RV>& sc) {
    constexpr size_t row = Row<I, V0, v>();
    const typename I::VI high = Field<I, 2 * s, 2>(I::LoadU8(group + 2 * kPanelRows + row));
    const typename I::VI q = I::SubI(I::Or(CleanNibble<I, s>(group, row), high), 32);
    return I::Mul(sc.d[v], I::ToF32(q));  // D * f32(q - 32)
  }
};

// acc[p][v][t] += w(p, v, s) * x[t][k0 + s] for k-steps s.. of a group.
template <class I, class Q, int NP, int RV, int NT, int V0, int s>
inline void GroupStep(typename I::V (&acc)[NP][RV][NT], const uint8_t* const (&group)[NP],
                      const Scales<I, RV> (&sc)[NP], const float* x, size_t xs) {
  typename I::V xb[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) xb[t] = I::Broadcast(x[t * xs + s]);
  [&]<int... v>(std::integer_sequence<int, v...>) {
    (
        [&] {
#pragma GCC unroll 16
          for (int p = 0; p < NP; ++p) {
            const typename I::V w = Q::template Weight<I, RV, V0, v, s>(group[p], sc[p]);
#pragma GCC unroll 16
            for (int t = 0; t < NT; ++t) acc[p][v][t] = I::Add(acc[p][v][t], I::Mul(w, xb[t]));
          }
        }(),
        ...);
  }(std::make_integer_sequence<int, RV>());
  if constexpr (s + 1 < static_cast<int>(Q::kPanel.group)) {
    GroupStep<I, Q, NP, RV, NT, V0, s + 1>(acc, group, sc, x, xs);
  }
}

// Lane vectors [V0, V0 + RV) of NP panels for NT tokens into
// tmp[p][t][kPanelRows]. x: token t at x + t*xs.
template <class I, class Q, int NP, int RV, int NT, int V0>
inline void Tile(const uint8_t* const (&panels)[NP], size_t cols, const float* x, size_t xs,
                 float* tmp) {
  constexpr QuantPanel P = Q::kPanel;
  constexpr size_t kGroups = P.sub / P.group, kSubBytes = kGroups * P.group_bytes;
  typename I::V acc[NP][RV][NT];
#pragma GCC unroll 16
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 16
    for (int v = 0; v < RV; ++v)
#pragma GCC unroll 16
      for (int t = 0; t < NT; ++t) acc[p][v][t] = I::Zero();
  const uint8_t* ahead[NP];
  for (int p = 0; p < NP; ++p) ahead[p] = panels[p] + kPrefetchBytes;
  for (size_t b = 0; b < cols / P.block; ++b) {
    for (size_t j = 0; j < P.block / P.sub; ++j) {
      Scales<I, RV> sc[NP];
      const uint8_t* group[NP];
#pragma GCC unroll 16
      for (int p = 0; p < NP; ++p) {
        const uint8_t* block = panels[p] + b * P.BlockBytes();
        Q::template LoadScales<I, RV, V0>(block, j, sc[p]);
        group[p] = block + P.head_bytes + j * kSubBytes;
        for (; ahead[p] < group[p] + kSubBytes + kPrefetchBytes; ahead[p] += 64) {
          __builtin_prefetch(ahead[p], 0, 3);
        }
      }
      const float* xk = x + b * P.block + j * P.sub;
      for (size_t g = 0; g < kGroups; ++g) {
        GroupStep<I, Q, NP, RV, NT, V0, 0>(acc, group, sc, xk + g * P.group, xs);
#pragma GCC unroll 16
        for (int p = 0; p < NP; ++p) group[p] += P.group_bytes;
      }
    }
  }
#pragma GCC unroll 16
  for (int p = 0; p < NP; ++p)
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t)
#pragma GCC unroll 16
      for (int v = 0; v < RV; ++v)
        I::Store(tmp + (p * NT + t) * kPanelRows + (V0 + v) * I::kLanes, acc[p][v][t]);
}

// NP whole panels from p for NT tokens.
template <class I, class Q, int NP, int NT>
inline void PanelsTile(const PackedMatrix& w, size_t p, const float* x, float* y, size_t ys) {
  constexpr int RV = static_cast<int>(kPanelRows / I::kLanes);
  const uint8_t* panels[NP];
  for (int i = 0; i < NP; ++i) panels[i] = w.panel(p + static_cast<size_t>(i));
  alignas(64) float tmp[NP * NT * kPanelRows];
  Tile<I, Q, NP, RV, NT, 0>(panels, w.cols(), x, w.cols(), tmp);
  panel_impl::Scatter(w, p, NP, NT, tmp, y, ys);
}

// Lane vectors [V0, V0 + RV), [V0 + RV, ...) of one panel for NT tokens.
template <class I, class Q, int RV, int NT, int V0>
inline void PanelPasses(const uint8_t* const (&panel)[1], size_t cols, const float* x, float* tmp) {
  static_assert(kPanelRows / I::kLanes % RV == 0, "RV vectors must tile a panel");
  Tile<I, Q, 1, RV, NT, V0>(panel, cols, x, cols, tmp);
  if constexpr (V0 + RV < static_cast<int>(kPanelRows / I::kLanes)) {
    PanelPasses<I, Q, RV, NT, V0 + RV>(panel, cols, x, tmp);
  }
}

template <class I, class Q, int RV, int NT>
inline void PrefillPanel(const PackedMatrix& w, size_t p, const float* x, float* y, size_t ys) {
  const uint8_t* panel[1] = {w.panel(p)};
  alignas(64) float tmp[NT * kPanelRows];
  PanelPasses<I, Q, RV, NT, 0>(panel, w.cols(), x, tmp);
  panel_impl::Scatter(w, p, 1, NT, tmp, y, ys);
}

// The matmul_packed contract for a quantized w: decode NPD panels at a
// time; more tokens RVP lane vectors x NTP tokens of one panel per pass.
template <class I, class Q, int NPD, int RVP, int NTP>
void MatmulT(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok, float* y,
             size_t ys) {
  const size_t cols = w.cols();
  if (n_tok == 1) {
    size_t p = p0;
    for (; p + NPD <= p1; p += NPD) PanelsTile<I, Q, NPD, 1>(w, p, x, y, 0);
    for (; p < p1; ++p) PanelsTile<I, Q, 1, 1>(w, p, x, y, 0);
    return;
  }
  for (size_t p = p0; p < p1; ++p) {  // as panel_impl::MatmulPackedT's prefill loop
    size_t t = 0;
    for (; t + NTP <= n_tok; t += NTP) PrefillPanel<I, Q, RVP, NTP>(w, p, x + t * cols, y + t * ys, ys);
    if constexpr (NTP > 1) {
      if (t < n_tok) {
        panel_impl::WithTokenCount<NTP - 1>(n_tok - t, [&]<int K>() {
          PrefillPanel<I, Q, RVP, K>(w, p, x + t * cols, y + t * ys, ys);
        });
      }
    }
  }
}

// Dispatch on w.type(). REQUIRES QuantPanelOf(w.type()) != nullptr.
template <class I, int NPD, int RVP, int NTP>
void Matmul(const PackedMatrix& w, size_t p0, size_t p1, const float* x, size_t n_tok, float* y,
            size_t ys) {
  switch (w.type()) {
    case WeightType::kQ8_0: return MatmulT<I, Q8_0, NPD, RVP, NTP>(w, p0, p1, x, n_tok, y, ys);
    case WeightType::kQ4_0: return MatmulT<I, Q4_0, NPD, RVP, NTP>(w, p0, p1, x, n_tok, y, ys);
    case WeightType::kQ4_K: return MatmulT<I, Q4_K, NPD, RVP, NTP>(w, p0, p1, x, n_tok, y, ys);
    case WeightType::kQ5_K: return MatmulT<I, Q5_K, NPD, RVP, NTP>(w, p0, p1, x, n_tok, y, ys);
    case WeightType::kQ6_K: return MatmulT<I, Q6_K, NPD, RVP, NTP>(w, p0, p1, x, n_tok, y, ys);
    default: return;
  }
}

}  // namespace lockstep::ops::quant_impl
