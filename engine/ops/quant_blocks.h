// The GGUF weight types of EXTENSIONS.md E2.3 (ggml type id, elements and
// bytes per block) and their scalar reference dequantizer: the exact f32
// value of every weight, each f32 operation of E2.3's formula rounded once
// in the order written, never fused; f16 values exact (a subnormal half is
// a normal f32 and is never flushed), integer arithmetic on quants exact.
// PackedMatrix (packed_matrix.h) keeps such weights at their own size and
// its kernels dequantize in registers to these same values.
//
// Everything here is a pure function of its arguments: thread-safe.
// DequantizeRow does no f32 arithmetic on subnormal inputs (f16 values are
// widened by integer operations), so its results do not depend on FTZ/DAZ.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "base/half_float.h"
#include "base/status.h"

namespace lockstep::ops {

// ggml type ids (E2.3's table); no other id is a weight type here.
enum class GgmlType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ8_0 = 8,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kBF16 = 30,
};

struct GgmlBlock {
  GgmlType type;
  size_t elems;      // elements per block (along a row)
  size_t bytes;      // bytes per block
  const char* name;  // "Q4_K": E2.3's spelling, for messages
};

// The block layout of ggml type id `id`, or nullopt for an id E2.3 does not
// list (the caller names the id and the tensor).
std::optional<GgmlBlock> FindGgmlType(uint32_t id);
// The layout of a listed type.
const GgmlBlock& BlockOf(GgmlType type);
// E2.3's name of type id `id`, or "unknown".
const char* GgmlTypeName(uint32_t id);

// Invalid (naming the type and `what`) unless n_elems is a whole number of
// blocks of `type`.
Status CheckRowLength(GgmlType type, uint64_t n_elems, const char* what);
// Bytes of a row of n_elems elements. REQUIRES n_elems % elems == 0.
size_t GgmlRowBytes(GgmlType type, size_t n_elems);

// One block's fields as integers, the bit layout of E2.3 undone.
struct BlockFields {
  uint16_t d = 0;     // f16 bits of d (every quantized type)
  uint16_t dmin = 0;  // f16 bits of dmin (Q4_K, Q5_K)
  // Q4_K/Q5_K: the 6-bit sc_j, m_j of sub-blocks j < 8; Q6_K: sc[i] for
  // i < 16 (signed).
  int sc[16] = {};
  int m[8] = {};
  // The stored quant of element e: Q8_0 qs (-128..127), Q4_0 and Q4_K
  // 0..15, Q5_K 0..31, Q6_K lo | hi << 4 (0..63; E2.3 subtracts 32, and
  // Q4_0's 8, in WeightValue).
  int q[256] = {};
};

// The fields of one block of a quantized type (Q8_0, Q4_0, Q4_K, Q5_K,
// Q6_K) at `block` (BlockOf(type).bytes of them).
void UnpackBlock(GgmlType type, const uint8_t* block, BlockFields* out);

// E2.3's f32 value of an element from its fields, the operations in E2.3's
// order: d, dmin the f16 values; sc, m the element's sub-block scale and
// min (Q4_K/Q5_K; Q6_K's sc is signed; others ignore them); q the stored
// quant as in BlockFields. Every product is exact; Q4_K/Q5_K's final
// subtraction is the one rounding.
inline float WeightValue(GgmlType type, float d, float dmin, int sc, int m, int q) {
  switch (type) {
    case GgmlType::kQ8_0: return static_cast<float>(q) * d;
    case GgmlType::kQ4_0: return d * static_cast<float>(q - 8);
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      const float dd = d * static_cast<float>(sc);
      const float mm = dmin * static_cast<float>(m);
      const float dq = dd * static_cast<float>(q);
      return dq - mm;
    }
    case GgmlType::kQ6_K: {
      const float dd = d * static_cast<float>(sc);
      return dd * static_cast<float>(q - 32);
    }
    default: return 0.0f;  // not a block type
  }
}

// out[i] = the E2.3 value of element i of a row of n_elems elements of
// `type`, stored as GgmlRowBytes(type, n_elems) bytes at `bytes` (any
// alignment; F32 bits are copied verbatim). REQUIRES n_elems % elems == 0
// and bytes.size() >= GgmlRowBytes(type, n_elems).
void DequantizeRow(GgmlType type, std::span<const uint8_t> bytes, size_t n_elems, float* out);

}  // namespace lockstep::ops
