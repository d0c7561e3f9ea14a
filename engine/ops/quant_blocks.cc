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
float F16At(const uint8_t* p) { return F16ToF32(U16At(p)); }
// f32(n) of a small integer: exact.
float F32Of(int n) { return static_cast<float>(n); }

// E2.3 Q8_0: w[i] = f32(qs[i]) * f16(d).
void Q8_0Block(const uint8_t* b, float* out) {
  const float d = F16At(b);
  for (int i = 0; i < 32; ++i) out[i] = F32Of(static_cast<int8_t>(b[2 + i])) * d;
}

// E2.3 Q4_0: w[i] = f16(d) * f32(q[i] - 8).
void Q4_0Block(const uint8_t* b, float* out) {
  const float d = F16At(b);
  for (int i = 0; i < 16; ++i) {
    out[i] = d * F32Of((b[2 + i] & 15) - 8);
    out[i + 16] = d * F32Of((b[2 + i] >> 4) - 8);
  }
}

// E2.3 Q4_K (qh == nullptr) and Q5_K: per sub-block j, D = f16(d) *
// f32(sc_j), M = f16(dmin) * f32(m_j); w = (D * f32(q)) - M.
void K4Block(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, float* out) {
  const float d = F16At(b), dmin = F16At(b + 2);
  uint8_t sc[8], m[8];
  UnpackK4Scales(b + 4, sc, m);
  for (int j = 0; j < 8; ++j) {
    const float dj = d * F32Of(sc[j]);
    const float mj = dmin * F32Of(m[j]);
    for (int l = 0; l < 32; ++l) {
      int q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
      if (qh != nullptr) q |= ((qh[l] >> j) & 1) << 4;
      const float dq = dj * F32Of(q);
      out[32 * j + l] = dq - mj;
    }
  }
}

// E2.3 Q6_K: element e = 128h + 32t + l; D = f16(d) * f32(sc[e/16]),
// w = D * f32(q).
void Q6_KBlock(const uint8_t* b, float* out) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const uint8_t* sc = b + 192;
  const float d = F16At(b + 208);
  for (int h = 0; h < 2; ++h) {
    for (int t = 0; t < 4; ++t) {
      for (int l = 0; l < 32; ++l) {
        const int e = 128 * h + 32 * t + l;
        const int lo = (ql[64 * h + 32 * (t & 1) + l] >> (4 * (t >> 1))) & 15;
        const int hi = (qh[32 * h + l] >> (2 * t)) & 3;
        const int q = (lo | (hi << 4)) - 32;
        const float dd = d * F32Of(static_cast<int8_t>(sc[e / 16]));
        out[e] = dd * F32Of(q);
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

uint32_t F16ToF32Bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return sign | 0x7F800000u | (man << 13);  // inf, NaN (payload kept)
  if (exp != 0) return sign | ((exp + 112) << 23) | (man << 13);
  if (man == 0) return sign;  // ±0
  // man * 2^-24 with man < 2^10: normalise on its highest set bit k.
  const int k = 31 - std::countl_zero(man);
  return sign | (static_cast<uint32_t>(k + 103) << 23) | ((man << (23 - k)) & 0x7FFFFFu);
}

float F16ToF32(uint16_t h) { return std::bit_cast<float>(F16ToF32Bits(h)); }

void UnpackK4Scales(const uint8_t* s, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = s[j] & 63;
    m[j] = s[j + 4] & 63;
  }
  for (int j = 4; j < 8; ++j) {
    sc[j] = static_cast<uint8_t>((s[j + 4] & 15) | ((s[j - 4] >> 6) << 4));
    m[j] = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
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
  for (size_t i = 0; i < n_elems / blk.elems; ++i, p += blk.bytes, out += blk.elems) {
    switch (type) {
      case GgmlType::kF16: *out = F16At(p); break;
      case GgmlType::kBF16: *out = std::bit_cast<float>(static_cast<uint32_t>(U16At(p)) << 16); break;
      case GgmlType::kQ8_0: Q8_0Block(p, out); break;
      case GgmlType::kQ4_0: Q4_0Block(p, out); break;
      case GgmlType::kQ4_K: K4Block(p, nullptr, p + 16, out); break;
      case GgmlType::kQ5_K: K4Block(p, p + 16, p + 48, out); break;
      case GgmlType::kQ6_K: Q6_KBlock(p, out); break;
      case GgmlType::kF32: break;
    }
  }
}

}  // namespace lockstep::ops
