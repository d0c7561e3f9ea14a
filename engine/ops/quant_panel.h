// The panel layout of quantized weights in a PackedMatrix (packed_matrix.h;
// types kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K): E2.3's blocks repacked across
// a panel's kPanelRows = 32 output rows so that a SIMD lane still owns one
// row, reads its quants at the same offset as its neighbours, and
// dequantizes in registers to E2.3's exact value (quant_blocks.h).
//
// A panel is cols / block panel blocks, one after another; a panel block
// holds k in [b*block, (b+1)*block) of the panel's 32 rows:
//   head: the rows' scale fields, each an array over the 32 rows:
//     Q8_0, Q4_0  d f16[32]                                       64 bytes
//     Q4_K, Q5_K  d f16[32], dmin f16[32], sc u8[8][32], m u8[8][32] 640
//                 (sc_j, m_j unpacked from E2.3's 6-bit packing)
//     Q6_K        d f16[32], sc i8[16][32]                         576
//   then block / group groups of `group` consecutive k, each a few
//   32-byte rows whose byte i belongs to panel row i:
//     Q8_0  group 1: qs i8                                          32 bytes
//     Q4_0, Q4_K  group 2: q[k] | q[k+1] << 4                       32
//     Q5_K  group 8: 4 such nibble rows (k..k+7), then one row whose
//           bit s is bit 4 of q[k+s]                                160
//     Q6_K  group 4: 2 nibble rows (k..k+3), then one row whose bits
//           2s, 2s+1 are bits 4, 5 of q[k+s]                        96
// q is BlockFields' stored quant (Q6_K before its - 32, Q4_0 before - 8).
// Every byte belongs to one row, so distinct rows can be packed from
// different threads. Bytes per row and block against the file's:
// Q8_0 34/34, Q4_0 18/18, Q6_K 210/210, Q4_K 148/144 (1.028x), Q5_K
// 180/176 (1.023x): sc and m unpacked to a byte each.
//
// Plain functions of their arguments: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/ops/quant_blocks.h"

namespace lockstep::ops {

struct QuantPanel {
  GgmlType ggml;
  size_t block;        // k per panel block (E2.3's elements per block)
  size_t sub;          // k per scale (sc/m) sub-block; == block for Q8_0, Q4_0
  size_t head_bytes;   // the head of a panel block
  size_t group;        // k per group
  size_t group_bytes;  // bytes per group
  constexpr size_t BlockBytes() const { return head_bytes + block / group * group_bytes; }
};

// Head offsets inside a panel block (the d array is at 0 for every type).
inline constexpr size_t kHeadDmin = 64;   // Q4_K, Q5_K
inline constexpr size_t kHeadSc = 128;    // Q4_K, Q5_K: sc[8][32]
inline constexpr size_t kHeadM = 384;     // Q4_K, Q5_K: m[8][32]
inline constexpr size_t kHeadSc6 = 64;    // Q6_K: sc[16][32]

inline constexpr QuantPanel kQ8_0Panel{GgmlType::kQ8_0, 32, 32, 64, 1, 32};
inline constexpr QuantPanel kQ4_0Panel{GgmlType::kQ4_0, 32, 32, 64, 2, 32};
inline constexpr QuantPanel kQ4_KPanel{GgmlType::kQ4_K, 256, 32, 640, 2, 32};
inline constexpr QuantPanel kQ5_KPanel{GgmlType::kQ5_K, 256, 32, 640, 8, 160};
inline constexpr QuantPanel kQ6_KPanel{GgmlType::kQ6_K, 256, 16, 576, 4, 96};

// Packs one row of `cols` elements in the file's layout (cols / block
// blocks of `p.ggml`) into row i < 32 of the panel at `panel`: writes
// only row i's bytes. REQUIRES cols % p.block == 0.
void PackQuantRow(const QuantPanel& p, const uint8_t* row, size_t cols, uint8_t* panel, size_t i);

// Whether row i of the panel at `panel` holds exactly the bytes
// PackQuantRow writes there for `row` (reads only row i's bytes). Since
// every bit of a block is a field PackQuantRow keeps, equal bytes mean an
// equal row of the file. REQUIRES cols % p.block == 0.
bool SameAsQuantRow(const QuantPanel& p, const uint8_t* row, size_t cols, const uint8_t* panel,
                    size_t i);

// E2.3's value of row i, column k of the panel at `panel` (cols columns),
// by WeightValue (quant_blocks.h).
float QuantPanelValue(const QuantPanel& p, const uint8_t* panel, size_t cols, size_t i, size_t k);

}  // namespace lockstep::ops
