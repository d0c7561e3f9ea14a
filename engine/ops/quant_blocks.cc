#include "engine/ops/quant_blocks.h"

#include <bit>
#include <cassert>
#include <cstring>
#include <string>

namespace lockstep::ops {
namespace {

constexpr GgmlBlock kBlocks[] = {
    {GgmlType::kF32, 1, 4, "F32"},       {GgmlType::kF16, 1, 2, "F16"},
    {GgmlType::kQ4_0, 32, 18, "Q4_0"},   {GgmlType::kQ8_0, 32, 34, "Q8_0"},
    {GgmlType::kQ4_K, 256, 144, "Q4_K"}, {GgmlType::kQ5_K, 256, 176, "Q5_K"},
    {GgmlType::kQ6_K, 256, 210, "Q6_K"}, {GgmlType::kBF16, 1, 2, "BF16"},
};

uint16_t U16At(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

// Q4_K/Q5_K's 6-bit sc_j and m_j from the 12 packed bytes s (E2.3).
void UnpackK4Scales(const uint8_t* s, BlockFields* f) {
  for (int j = 0; j < 4; ++j) {
    f->sc[j] = s[j] & 63;
    f->m[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    f->sc[j] = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
    f->m[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Element 32j + l of Q4_K (qh == nullptr) or Q5_K.
void K4Quants(const uint8_t* qh, const uint8_t* qs, BlockFields* f) {
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 32; ++l) {
      int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
      if (qh != nullptr) q |= ((qh[l] >> j) & 1) << 4;
      f->q[32 * j + l] = q;
    }
  }
}

// Element 128h + 32t + l of Q6_K.
void Q6Quants(const uint8_t* ql, const uint8_t* qh, BlockFields* f) {
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < 4; ++t) {
      for (int l = 0; l < 32; ++l) {
        const int lo = (ql[64 * h + 32 * (t & 1) + l] >> (4 * (t >> 1))) & 15;
        const int hi = (qh[32 * h + l] >> (2 * t)) & 3;
        f->q[128 * h + 32 * t + l] = lo | (hi << 4);
      }
    }
  }
}

}  // namespace

std::optional<GgmlBlock> FindGgmlType(uint32_t id) {
  for (const GgmlBlock& b : kBlocks) {
    if (static_cast<uint32_t>(b.type) == id) return b;
  }
  return std::nullopt;
}

const GgmlBlock& BlockOf(GgmlType type) {
  for (const GgmlBlock& b : kBlocks) {
    if (b.type == type) return b;
  }
  assert(false && "BlockOf: a GgmlType outside E2.3");
  return kBlocks[0];
}

const char* GgmlTypeName(uint32_t id) {
  const std::optional<GgmlBlock> b = FindGgmlType(id);
  return b ? b->name : "unknown";
}

Status CheckRowLength(GgmlType type, uint64_t n_elems, const char* what) {
  const GgmlBlock& b = BlockOf(type);
  if (n_elems % b.elems == 0) return Status::Ok();
  return InvalidError(std::string(what) + ": a " + b.name + " row holds whole blocks of " +
                      std::to_string(b.elems) + " elements; " + std::to_string(n_elems) +
                      " is not a multiple of " + std::to_string(b.elems));
}

size_t GgmlRowBytes(GgmlType type, size_t n_elems) {
  const GgmlBlock& b = BlockOf(type);
  assert(n_elems % b.elems == 0);
  return n_elems / b.elems * b.bytes;
}

void UnpackBlock(GgmlType type, const uint8_t* b, BlockFields* f) {
  switch (type) {
    case GgmlType::kQ8_0:
      f->d = U16At(b);
      for (int i = 0; i < 32; ++i) f->q[i] = static_cast<int8_t>(b[2 + i]);
      return;
    case GgmlType::kQ4_0:
      f->d = U16At(b);
      for (int i = 0; i < 16; ++i) {
        f->q[i] = b[2 + i] & 15;
        f->q[i + 16] = b[2 + i] >> 4;
      }
      return;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      f->d = U16At(b);
      f->dmin = U16At(b + 2);
      UnpackK4Scales(b + 4, f);
      const bool five = type == GgmlType::kQ5_K;
      K4Quants(five ? b + 16 : nullptr, b + (five ? 48 : 16), f);
      return;
    }
    case GgmlType::kQ6_K:
      f->d = U16At(b + 208);
      for (int i = 0; i < 16; ++i) f->sc[i] = static_cast<int8_t>(b[192 + i]);
      Q6Quants(b, b + 128, f);
      return;
    default: assert(false && "UnpackBlock: not a block type");
  }
}

void DequantizeRow(GgmlType type, std::span<const uint8_t> bytes, size_t n_elems, float* out) {
  const GgmlBlock& blk = BlockOf(type);
  assert(n_elems % blk.elems == 0 && bytes.size() >= GgmlRowBytes(type, n_elems));
  const uint8_t* p = bytes.data();
  if (type == GgmlType::kF32) {
    if (n_elems != 0) std::memcpy(out, p, 4 * n_elems);
    return;
  }
  if (type == GgmlType::kF16 || type == GgmlType::kBF16) {
    for (size_t i = 0; i < n_elems; ++i) {
      const uint16_t h = U16At(p + 2 * i);
      out[i] = type == GgmlType::kF16 ? WidenF16(h) : std::bit_cast<float>(WidenBf16Bits(h));
    }
    return;
  }
  // Sub-blocks of 32 (Q4_K/Q5_K) or 16 (Q6_K) share sc/m.
  const size_t sub = type == GgmlType::kQ6_K ? 16 : 32;
  BlockFields f;
  for (size_t i = 0; i < n_elems / blk.elems; ++i, p += blk.bytes, out += blk.elems) {
    UnpackBlock(type, p, &f);
    const float d = WidenF16(f.d), dmin = WidenF16(f.dmin);
    for (size_t e = 0; e < blk.elems; ++e) {
      const size_t j = e / sub;
      out[e] = WeightValue(type, d, dmin, f.sc[j], j < 8 ? f.m[j] : 0, f.q[e]);
    }
  }
}

}  // namespace lockstep::ops
