#include "engine/ops/quant_panel.h"

#include <cassert>

namespace lockstep::ops {
namespace {

constexpr size_t kRows = 32;  // kPanelRows (packed_matrix.h)

uint16_t U16At(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

void PutU16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v & 0xFF);
  p[1] = static_cast<uint8_t>(v >> 8);
}

// Row i's fields of one panel block's head.
void PackHead(const QuantPanel& p, const BlockFields& f, uint8_t* head, size_t i) {
  PutU16(head + 2 * i, f.d);
  if (p.ggml == GgmlType::kQ6_K) {
    for (size_t j = 0; j < 16; ++j) head[kHeadSc6 + kRows * j + i] = static_cast<uint8_t>(f.sc[j]);
  } else if (p.ggml == GgmlType::kQ4_K || p.ggml == GgmlType::kQ5_K) {
    PutU16(head + kHeadDmin + 2 * i, f.dmin);
    for (size_t j = 0; j < 8; ++j) {
      head[kHeadSc + kRows * j + i] = static_cast<uint8_t>(f.sc[j]);
      head[kHeadM + kRows * j + i] = static_cast<uint8_t>(f.m[j]);
    }
  }
}

// Row i's bytes of the group of k0.. (quant_panel.h).
void PackGroup(const QuantPanel& p, const int* q, uint8_t* g, size_t i) {
  if (p.group == 1) {
    g[i] = static_cast<uint8_t>(q[0]);
    return;
  }
  uint32_t high = 0;
  for (size_t s = 0; s < p.group; s += 2) {
    g[kRows * (s / 2) + i] = static_cast<uint8_t>((q[s] & 15) | (q[s + 1] & 15) << 4);
  }
  const size_t width = p.ggml == GgmlType::kQ6_K ? 2 : 1;
  for (size_t s = 0; s < p.group; ++s) high |= static_cast<uint32_t>(q[s] >> 4) << (width * s);
  if (p.group > 2) g[kRows * (p.group / 2) + i] = static_cast<uint8_t>(high);
}

// Row i's stored quant at k (< block) of a panel block's groups.
int QuantOf(const QuantPanel& p, const uint8_t* groups, size_t i, size_t k) {
  const uint8_t* g = groups + (k / p.group) * p.group_bytes;
  const size_t s = k % p.group;
  if (p.group == 1) return static_cast<int8_t>(g[i]);
  const int nibble = (g[kRows * (s / 2) + i] >> (4 * (s % 2))) & 15;
  if (p.group == 2) return nibble;
  const uint8_t high = g[kRows * (p.group / 2) + i];
  if (p.ggml == GgmlType::kQ6_K) return nibble | ((high >> (2 * s)) & 3) << 4;
  return nibble | ((high >> s) & 1) << 4;
}

// The largest panel block (Q6_K's): a scratch block fits any type.
constexpr size_t kMaxBlockBytes = kQ6_KPanel.BlockBytes();
static_assert(kQ4_KPanel.BlockBytes() <= kMaxBlockBytes && kQ5_KPanel.BlockBytes() <= kMaxBlockBytes &&
              kQ8_0Panel.BlockBytes() <= kMaxBlockBytes && kQ4_0Panel.BlockBytes() <= kMaxBlockBytes);

// Row i's bytes of the panel block at `dst` from the file's block at `src`.
void PackBlock(const QuantPanel& p, const uint8_t* src, uint8_t* dst, size_t i) {
  BlockFields f;
  UnpackBlock(p.ggml, src, &f);
  PackHead(p, f, dst, i);
  for (size_t k = 0; k < p.block; k += p.group) {
    PackGroup(p, f.q + k, dst + p.head_bytes + (k / p.group) * p.group_bytes, i);
  }
}

// Whether row i's bytes of panel blocks a and b are equal: its f16 d (and
// dmin) at 2i of the head's first 64-byte arrays, then byte i of every
// 32-byte row after them (quant_panel.h: every other head field and
// every group is such rows).
bool SameRowBytes(const QuantPanel& p, const uint8_t* a, const uint8_t* b, size_t i) {
  const bool has_dmin = p.ggml == GgmlType::kQ4_K || p.ggml == GgmlType::kQ5_K;
  const size_t halves = has_dmin ? kHeadSc : kHeadDmin;
  for (size_t h = 0; h < halves; h += kHeadDmin) {
    if (a[h + 2 * i] != b[h + 2 * i] || a[h + 2 * i + 1] != b[h + 2 * i + 1]) return false;
  }
  for (size_t at = halves + i; at < p.BlockBytes(); at += kRows) {
    if (a[at] != b[at]) return false;
  }
  return true;
}

}  // namespace

void PackQuantRow(const QuantPanel& p, const uint8_t* row, size_t cols, uint8_t* panel, size_t i) {
  assert(cols % p.block == 0 && i < kRows);
  const size_t file_bytes = BlockOf(p.ggml).bytes;
  for (size_t b = 0; b < cols / p.block; ++b) {
    PackBlock(p, row + b * file_bytes, panel + b * p.BlockBytes(), i);
  }
}

bool SameAsQuantRow(const QuantPanel& p, const uint8_t* row, size_t cols, const uint8_t* panel,
                    size_t i) {
  assert(cols % p.block == 0 && i < kRows);
  const size_t file_bytes = BlockOf(p.ggml).bytes;
  uint8_t scratch[kMaxBlockBytes];
  for (size_t b = 0; b < cols / p.block; ++b) {
    PackBlock(p, row + b * file_bytes, scratch, i);
    if (!SameRowBytes(p, scratch, panel + b * p.BlockBytes(), i)) return false;
  }
  return true;
}

float QuantPanelValue(const QuantPanel& p, const uint8_t* panel, size_t cols, size_t i, size_t k) {
  assert(k < cols && i < kRows);
  const uint8_t* blk = panel + (k / p.block) * p.BlockBytes();
  const size_t kk = k % p.block, j = kk / p.sub;
  const float d = WidenF16(U16At(blk + 2 * i));
  float dmin = 0.0f;
  int sc = 0, m = 0;
  if (p.ggml == GgmlType::kQ6_K) {
    sc = static_cast<int8_t>(blk[kHeadSc6 + kRows * j + i]);
  } else if (p.ggml == GgmlType::kQ4_K || p.ggml == GgmlType::kQ5_K) {
    dmin = WidenF16(U16At(blk + kHeadDmin + 2 * i));
    sc = blk[kHeadSc + kRows * j + i];
    m = blk[kHeadM + kRows * j + i];
  }
  return WeightValue(p.ggml, d, dmin, sc, m, QuantOf(p, blk + p.head_bytes, i, kk));
}

}  // namespace lockstep::ops
