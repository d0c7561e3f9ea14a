// The E2.3 block types and DequantizeRow against expectations computed
// apart from the code under test: values worked out by hand (written in the
// comments), values gguf-py's dequantize gives for the same bytes, and an
// exact-arithmetic model of E2.3 in this file. The model reads every quant
// by scattering each stored byte to the elements it holds (not by E2.3's
// per-element formula) and computes in binary64, where every value here is
// an integer multiple of 2^-24 below 2^26 and so exact; one rounding to f32
// at the end is then E2.3's one f32 rounding of the subtraction.
#include "engine/ops/quant_blocks.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <vector>

#include "random_blocks.h"

namespace lockstep::ops {
namespace {

using testing::PutHalf;
using testing::RandomBlocks;

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// The value of binary16 bits h in binary64, from the definition.
double HalfValue(uint16_t h) {
  const int e = (h >> 10) & 31, m = h & 1023;
  const double mag = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

std::vector<float> Dequantize(GgmlType type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n, -7.0f);
  DequantizeRow(type, bytes, n, out.data());
  return out;
}

TEST(QuantBlocks, TheTableIsE23s) {
  struct Row { uint32_t id; size_t elems, bytes; const char* name; };
  const Row want[] = {{0, 1, 4, "F32"},       {1, 1, 2, "F16"},       {30, 1, 2, "BF16"},
                      {2, 32, 18, "Q4_0"},    {8, 32, 34, "Q8_0"},    {12, 256, 144, "Q4_K"},
                      {13, 256, 176, "Q5_K"}, {14, 256, 210, "Q6_K"}};
  for (const Row& r : want) {
    const std::optional<GgmlBlock> b = FindGgmlType(r.id);
    ASSERT_TRUE(b.has_value()) << r.name;
    EXPECT_EQ(static_cast<uint32_t>(b->type), r.id);
    EXPECT_EQ(b->elems, r.elems) << r.name;
    EXPECT_EQ(b->bytes, r.bytes) << r.name;
    EXPECT_STREQ(b->name, r.name);
    EXPECT_STREQ(GgmlTypeName(r.id), r.name);
    EXPECT_EQ(BlockOf(b->type).bytes, r.bytes);
  }
  for (uint32_t id : {3u, 6u, 7u, 9u, 10u, 11u, 15u, 16u, 29u, 31u, 39u, 0xFFFFFFFFu}) {
    EXPECT_FALSE(FindGgmlType(id).has_value()) << id;
    EXPECT_STREQ(GgmlTypeName(id), "unknown") << id;
  }
}

TEST(QuantBlocks, RowLengthsAreWholeBlocks) {
  EXPECT_TRUE(CheckRowLength(GgmlType::kQ4_K, 512, "blk.0.ffn_up.weight").ok());
  const Status bad = CheckRowLength(GgmlType::kQ4_K, 576, "blk.0.ffn_up.weight");
  EXPECT_EQ(bad.kind(), ErrorKind::kInvalid);
  EXPECT_NE(bad.message().find("blk.0.ffn_up.weight"), std::string::npos) << bad.message();
  EXPECT_NE(bad.message().find("Q4_K"), std::string::npos) << bad.message();
  EXPECT_FALSE(CheckRowLength(GgmlType::kQ8_0, 33, "t").ok());
  EXPECT_TRUE(CheckRowLength(GgmlType::kF16, 33, "t").ok());
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ6_K, 512), 420u);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kQ4_0, 64), 36u);
  EXPECT_EQ(GgmlRowBytes(GgmlType::kF32, 3), 12u);
}

// Every half: finite ones against their binary64 value, subnormals
// included (never flushed), inf and NaN by their bits.
TEST(QuantBlocks, EveryHalfWidensExactly) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const uint16_t x = static_cast<uint16_t>(h);
    const uint32_t got = WidenF16Bits(x);
    if (((x >> 10) & 31) == 31) {
      const uint32_t want = (x & 0x8000u) << 16 | 0x7F800000u | (x & 0x3FFu) << 13;
      ASSERT_EQ(got, want) << std::hex << h;
      continue;
    }
    ASSERT_EQ(got, Bits(static_cast<float>(HalfValue(x)))) << std::hex << h;
    ASSERT_EQ(Bits(WidenF16(x)), got);
  }
  EXPECT_EQ(WidenF16Bits(0x0001), 0x33800000u);  // 2^-24, the smallest subnormal half
  EXPECT_EQ(WidenF16Bits(0x83FF), 0xB87FC000u);  // -(1023 * 2^-24)
  EXPECT_EQ(WidenF16Bits(0x8000), 0x80000000u);
}

TEST(QuantBlocks, HandWorkedValues) {
  // Q8_0, d = 0x0001 = 2^-24: w = q * 2^-24; q = -128 gives -2^-17.
  std::vector<uint8_t> q8(34, 0);
  PutHalf(q8.data(), 0x0001);
  q8[2] = 0x80;   // -128
  q8[3] = 0x7F;   // 127
  q8[33] = 0xFF;  // -1
  std::vector<float> w = Dequantize(GgmlType::kQ8_0, q8, 32);
  EXPECT_EQ(w[0], -0x1p-17f);
  EXPECT_EQ(w[1], 127 * 0x1p-24f);
  EXPECT_EQ(w[31], -0x1p-24f);
  EXPECT_EQ(Bits(w[2]), 0u);  // 0 * 2^-24 = +0

  // Q4_0, d = -0.5 (0xB800): element i from the low nibble of byte i,
  // element 16 + i from the high one; w = -0.5 * (q - 8).
  std::vector<uint8_t> q4(18, 0);
  PutHalf(q4.data(), 0xB800);
  q4[2] = 0xF0;  // q[0] = 0 -> 4, q[16] = 15 -> -3.5
  q4[17] = 0x9A;  // q[15] = 10 -> -1, q[31] = 9 -> -0.5
  w = Dequantize(GgmlType::kQ4_0, q4, 32);
  EXPECT_EQ(w[0], 4.0f);
  EXPECT_EQ(w[16], -3.5f);
  EXPECT_EQ(w[15], -1.0f);
  EXPECT_EQ(w[31], -0.5f);
  EXPECT_EQ(w[1], 4.0f);

  // Q4_K, d = 2048 (0x6800), dmin = 2^-24 (0x0001), sub-block 0: sc = 63,
  // m = 1, q = 15: D*q = 1935360 exactly, M = 2^-24; the f32 subtraction
  // rounds 1935360 - 2^-24 back to 1935360 (ulp there is 0.125).
  // Sub-block 5: sc_5 = (s[9] & 15) | (s[1] >> 6) << 4 = 1 | 3 << 4 = 49,
  // m_5 = (s[9] >> 4) | (s[5] >> 6) << 4 = 2 | 2 << 4 = 34; q = 0:
  // w = 0 - 34 * 2^-24.
  std::vector<uint8_t> k4(144, 0);
  PutHalf(k4.data(), 0x6800);
  PutHalf(k4.data() + 2, 0x0001);
  k4[4 + 0] = 63;            // sc_0
  k4[4 + 4] = 1;             // m_0
  k4[4 + 1] = 3 << 6;        // high bits of sc_5
  k4[4 + 5] = 2 << 6;        // high bits of m_5
  k4[4 + 9] = 0x21;          // low bits of sc_5 (1) and m_5 (2)
  k4[16 + 0] = 0x0F;         // element 0: q = 15; element 32: q = 0
  w = Dequantize(GgmlType::kQ4_K, k4, 256);
  EXPECT_EQ(w[0], 1935360.0f);
  EXPECT_EQ(w[1], -0x1p-24f);  // q = 0: 0 - M
  EXPECT_EQ(w[32 * 5 + 3], -34 * 0x1p-24f);
  EXPECT_EQ(Bits(w[32 * 2]), 0u);  // sc = m = 0: 0 - 0 = +0

  // Q6_K, d = -2^-24 (0x8001), sc[0] = -128: D = 2^-17; element 0 with
  // lo = 15, hi = 3: q = 63 - 32 = 31 -> 31 * 2^-17.
  std::vector<uint8_t> k6(210, 0);
  PutHalf(k6.data() + 208, 0x8001);
  k6[192] = 0x80;
  k6[0] = 0x0F;
  k6[128] = 0x03;
  w = Dequantize(GgmlType::kQ6_K, k6, 256);
  EXPECT_EQ(w[0], 31 * 0x1p-17f);
  EXPECT_EQ(w[1], -32 * 0x1p-17f);  // q = 0 - 32
  // Element 16: sc[1] = 0, so D = -2^-24 * 0 = -0, and q = -32: +0.
  EXPECT_EQ(Bits(w[16]), 0u);
}

// Blocks of bytes (i*i*7 + i*13 + seed) & 255 with chosen f16 scales, and
// the f32 bits gguf-py's dequantize gives for them (every element of a
// 32-element block; elements 8i + i%8 of a 256-element one: four per
// 32-element sub-block, two per Q6_K scale, every (h, t)).
struct Golden {
  GgmlType type;
  std::vector<uint32_t> bits;
};

std::vector<uint8_t> Pattern(size_t n, int seed) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((i * i * 7 + i * 13 + seed) & 0xFF);
  return b;
}

TEST(QuantBlocks, GgufPyGivesTheSameValues) {
  const Golden golden[] = {
      {GgmlType::kQ8_0,
       {0x3B5BC900u, 0x3BCDCC80u, 0xBBB5D280u, 0xBA6FC400u, 0x3B95DA80u, 0xBB99D980u,
        0x3B23D700u, 0xBBA5D680u, 0x3B7BC100u, 0xBB03DF00u, 0xBBE5C680u, 0x3B91DB80u,
        0x3A97DA00u, 0xBAA7D600u, 0xBB3BD100u, 0xBB6BC500u, 0xBB63C700u, 0xBB23D700u,
        0xBA2FD400u, 0x3B03DF00u, 0x3BB5D280u, 0xBBB9D180u, 0xB9DFC800u, 0x3BB9D180u,
        0xBB43CF00u, 0x3B9DD880u, 0xBB0BDD00u, 0x3BF1C380u, 0x3B0BDD00u, 0xBB13DB00u,
        0xBBBDD080u, 0x3BE9C580u}},
      {GgmlType::kQ4_0,
       {0x80000000u, 0x80000000u, 0x40A46000u, 0x41769000u, 0xC1246000u, 0x41246000u,
        0xC0A46000u, 0xC1769000u, 0x41A46000u, 0x41A46000u, 0xC1769000u, 0xC0A46000u,
        0x41246000u, 0xC1246000u, 0x41769000u, 0x40A46000u, 0x414D7800u, 0x40A46000u,
        0xC0A46000u, 0xC18FD400u, 0x41246000u, 0xC0F69000u, 0x41769000u, 0xC0A46000u,
        0x41246000u, 0xC1769000u, 0x80000000u, 0x41246000u, 0x418FD400u, 0xC1769000u,
        0xC14D7800u, 0xC1246000u}},
      {GgmlType::kQ4_K,
       {0x414E7750u, 0x414E9890u, 0x414E87F0u, 0x414E71C5u, 0x4161D959u, 0x4161BC5Du,
        0x4161B8BDu, 0x4161CE7Bu, 0x3E99F8AAu, 0x3E9B5B52u, 0x3E9AA9FEu, 0x3E99BD8Eu,
        0x411E8EE3u, 0x411E9DF3u, 0x411E8B20u, 0x411E92A7u, 0x4019C812u, 0x401A6859u,
        0x401A1835u, 0x4019AD5Bu, 0x412CE093u, 0x412CE093u, 0x412CFDEBu, 0x412CF588u,
        0x40A342F4u, 0x40A366C2u, 0x40A354DBu, 0x40A33CFCu, 0x4194E7C8u, 0x4194E163u,
        0x4194E62Fu, 0x4194DC97u}},
      {GgmlType::kQ5_K,
       {0x46F9D800u, 0xB6300000u, 0x479C2700u, 0x4679D800u, 0x47B6B2C0u, 0x4803F2E0u,
        0x48739900u, 0x4883F2E0u, 0x475A9D00u, 0xB4000000u, 0x46DA9D00u, 0x45AEE400u,
        0x484843F0u, 0x484843F0u, 0x48890610u, 0x487CF780u, 0x47F9D800u, 0xB5100000u,
        0x48226600u, 0x4647E000u, 0x48A9D0D0u, 0x48926490u, 0x48A3F5C0u, 0x478C8980u,
        0x47ABC480u, 0x47896A00u, 0x47DF4C40u, 0x479A9740u, 0x484E82F0u, 0x4806AE70u,
        0x47FB67C0u, 0x48339340u}},
      {GgmlType::kQ6_K,
       {0xBC5963C0u, 0xBC943860u, 0xBD493A50u, 0xBD0D9AD0u, 0x3A712C00u, 0x3B424700u,
        0x3D5CA7D0u, 0x3D5CA7D0u, 0x3D8CAF00u, 0xBD6D6750u, 0x3CB18780u, 0x3C434840u,
        0x3C0CAF00u, 0xBC02A280u, 0x3B8AAC80u, 0xBA712C00u, 0xBB8C0380u, 0xBBBEED80u,
        0x3C07A8C0u, 0x3BBEED80u, 0xBA10B400u, 0xBAE92200u, 0xBCB5B760u, 0xBCB5B760u,
        0xBBD90E00u, 0x3C742FC0u, 0x00000000u, 0x3D23B650u, 0x3CA4CD00u, 0xBCB288C0u,
        0xBCD48860u, 0x3CC4CA20u}},
  };
  struct Scales { int seed; size_t off[2]; uint16_t h[2]; };
  const Scales scales[] = {{1, {0, 0}, {0x03FF, 0x03FF}},      // Q8_0: d the largest subnormal
                           {2, {0, 0}, {0xC123, 0xC123}},      // Q4_0: d negative
                           {3, {0, 2}, {0x0123, 0xB4CD}},      // Q4_K: d subnormal, dmin < 0
                           {4, {0, 2}, {0x5A3F, 0x0001}},      // Q5_K: subtraction rounds
                           {5, {208, 208}, {0x8157, 0x8157}}};  // Q6_K: d subnormal, < 0
  for (size_t c = 0; c < 5; ++c) {
    const GgmlBlock& b = BlockOf(golden[c].type);
    std::vector<uint8_t> bytes = Pattern(b.bytes, scales[c].seed);
    for (int i = 0; i < 2; ++i) PutHalf(bytes.data() + scales[c].off[i], scales[c].h[i]);
    const std::vector<float> w = Dequantize(b.type, bytes, b.elems);
    for (size_t i = 0; i < 32; ++i) {
      const size_t e = b.elems == 32 ? i : 8 * i + i % 8;
      EXPECT_EQ(Bits(w[e]), golden[c].bits[i]) << b.name << " element " << e;
    }
  }
}

// The exact model of one block (see the top of this file).
std::vector<float> ModelBlock(GgmlType type, const uint8_t* b) {
  std::vector<int> q(256, 0);
  std::vector<double> scale(256, 0.0), offset(256, 0.0);
  auto scatter_nibbles = [&](const uint8_t* qs, size_t n_bytes, size_t run) {
    // byte i: low nibble -> element (i / run) * 2 * run + i % run, high
    // nibble -> run elements further.
    for (size_t i = 0; i < n_bytes; ++i) {
      const size_t e = (i / run) * 2 * run + i % run;
      q[e] += qs[i] & 15;
      q[e + run] += qs[i] >> 4;
    }
  };
  if (type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0) {
    const double d = HalfValue(static_cast<uint16_t>(b[0] | b[1] << 8));
    for (int i = 0; i < 32; ++i) {
      q[i] = type == GgmlType::kQ8_0 ? static_cast<int8_t>(b[2 + i]) : -8;
      scale[i] = d;
    }
    if (type == GgmlType::kQ4_0) scatter_nibbles(b + 2, 16, 16);
  } else if (type == GgmlType::kQ4_K || type == GgmlType::kQ5_K) {
    const double d = HalfValue(static_cast<uint16_t>(b[0] | b[1] << 8));
    const double dmin = HalfValue(static_cast<uint16_t>(b[2] | b[3] << 8));
    // Each 6-bit field as (byte, first bit, width) pieces, low piece first.
    struct Piece { int byte, bit, width; };
    const Piece sc[8][2] = {{{0, 0, 6}, {}}, {{1, 0, 6}, {}}, {{2, 0, 6}, {}}, {{3, 0, 6}, {}},
                            {{8, 0, 4}, {0, 6, 2}}, {{9, 0, 4}, {1, 6, 2}},
                            {{10, 0, 4}, {2, 6, 2}}, {{11, 0, 4}, {3, 6, 2}}};
    const Piece mn[8][2] = {{{4, 0, 6}, {}}, {{5, 0, 6}, {}}, {{6, 0, 6}, {}}, {{7, 0, 6}, {}},
                            {{8, 4, 4}, {4, 6, 2}}, {{9, 4, 4}, {5, 6, 2}},
                            {{10, 4, 4}, {6, 6, 2}}, {{11, 4, 4}, {7, 6, 2}}};
    auto field = [&](const Piece (&p)[2]) {
      int v = 0, at = 0;
      for (const Piece& x : p) {
        v |= ((b[4 + x.byte] >> x.bit) & ((1 << x.width) - 1)) << at;
        at += x.width;
      }
      return v;
    };
    for (int e = 0; e < 256; ++e) {
      scale[e] = d * field(sc[e / 32]);
      offset[e] = dmin * field(mn[e / 32]);
    }
    const bool five = type == GgmlType::kQ5_K;
    scatter_nibbles(b + (five ? 48 : 16), 128, 32);
    for (int l = 0; five && l < 32; ++l) {
      for (int j = 0; j < 8; ++j) q[32 * j + l] += ((b[16 + l] >> j) & 1) * 16;
    }
  } else {  // Q6_K
    const double d = HalfValue(static_cast<uint16_t>(b[208] | b[209] << 8));
    for (int e = 0; e < 256; ++e) {
      scale[e] = d * static_cast<int8_t>(b[192 + e / 16]);
    }
    // ql byte i < 64 of half h: its low nibble is element 128h + i (t =
    // i / 32), its high nibble element 128h + 64 + i (t = i / 32 + 2).
    std::vector<int> lo(256, 0);
    for (int h = 0; h < 2; ++h) {
      for (int i = 0; i < 64; ++i) {
        const uint8_t byte = b[64 * h + i];
        lo[128 * h + i] = byte & 15;
        lo[128 * h + 64 + i] = byte >> 4;
      }
    }
    for (int e = 0; e < 256; ++e) q[e] = lo[e] - 32;
    for (int i = 0; i < 64; ++i) {  // qh byte i: 4 two-bit fields, t = 0..3
      for (int t = 0; t < 4; ++t) q[128 * (i / 32) + 32 * t + i % 32] += ((b[128 + i] >> (2 * t)) & 3) * 16;
    }
  }
  std::vector<float> w(256);
  for (int e = 0; e < 256; ++e) w[e] = static_cast<float>(scale[e] * q[e] - offset[e]);
  return w;
}

// Rows of several random blocks each: every element equals the model, and
// the values really vary (the generator is not stuck on one block).
TEST(QuantBlocks, RandomBlocksEqualTheExactModel) {
  std::mt19937 rng(27);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ5_K,
                        GgmlType::kQ6_K}) {
    const GgmlBlock& b = BlockOf(type);
    std::set<uint32_t> distinct;
    for (int rep = 0; rep < 200; ++rep) {
      const size_t n_blocks = 1 + rng() % 3;
      const std::vector<uint8_t> bytes = RandomBlocks(rng, type, n_blocks);
      const std::vector<float> w = Dequantize(type, bytes, n_blocks * b.elems);
      for (size_t k = 0; k < n_blocks; ++k) {
        const std::vector<float> want = ModelBlock(type, bytes.data() + k * b.bytes);
        for (size_t e = 0; e < b.elems; ++e) {
          ASSERT_EQ(Bits(w[k * b.elems + e]), Bits(want[e]))
              << b.name << " block " << k << " element " << e << " rep " << rep;
          distinct.insert(Bits(want[e]));
        }
      }
    }
    // Q4_0 has 16 values per scale; the others thousands.
    EXPECT_GT(distinct.size(), type == GgmlType::kQ4_0 ? 120u : 2000u) << b.name;
  }
}

// F16, BF16 and F32 rows: element by element their E2.3 value.
TEST(QuantBlocks, PlainTypesAreElementwise) {
  const std::vector<uint8_t> bytes = {0x01, 0x00, 0xFF, 0x83, 0x00, 0x3C, 0x00, 0x80};
  std::vector<float> w = Dequantize(GgmlType::kF16, bytes, 4);
  EXPECT_EQ(Bits(w[0]), 0x33800000u);
  EXPECT_EQ(Bits(w[1]), 0xB87FC000u);
  EXPECT_EQ(w[2], 1.0f);
  EXPECT_EQ(Bits(w[3]), 0x80000000u);
  w = Dequantize(GgmlType::kBF16, bytes, 4);
  EXPECT_EQ(Bits(w[0]), 0x00010000u);  // an f32 subnormal: kept; DAZ applies where it is used
  EXPECT_EQ(Bits(w[1]), 0x83FF0000u);
  EXPECT_EQ(w[2], 0x1p-7f);  // 0x3C00 as bf16 = 2^-7
  w = Dequantize(GgmlType::kF32, bytes, 2);
  EXPECT_EQ(Bits(w[0]), 0x83FF0001u);
  EXPECT_EQ(Bits(w[1]), 0x80003C00u);
}

}  // namespace
}  // namespace lockstep::ops
