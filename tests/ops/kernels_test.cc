// Every kernel table this CPU supports against the scalar reference:
// memcmp equality (not closeness) over many shapes, odd tails, misaligned
// pointers, sub-ranges of panels, and special values under FTZ/DAZ.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "engine/ops/dispatch.h"
#include "engine/ops/kernels.h"
#include "random_values.h"
#include "engine/ops/packed_matrix.h"

namespace lockstep::ops {
namespace {

using testing::FromBits;
using testing::RandomValues;

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

std::vector<const Kernels*> Tables() {
  std::vector<const Kernels*> out;
  for (const std::string& n : AvailableIsas()) out.push_back(KernelsByName(n));
  return out;
}

// bf16-representable values (low 16 bits zero), so packing as bf16 is exact.
std::vector<uint8_t> ToBf16Bytes(const std::vector<float>& v, std::vector<float>* widened) {
  std::vector<uint8_t> bytes(v.size() * 2);
  widened->resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t b = static_cast<uint16_t>(Bits(v[i]) >> 16);
    bytes[2 * i] = static_cast<uint8_t>(b & 0xFF);
    bytes[2 * i + 1] = static_cast<uint8_t>(b >> 8);
    (*widened)[i] = FromBits(static_cast<uint32_t>(b) << 16);
  }
  return bytes;
}

// The §5.2 definition straight from row-major weights.
std::vector<float> Reference(const std::vector<float>& w, size_t rows, size_t cols,
                             const float* x, size_t n_tok) {
  std::vector<float> y(n_tok * rows);
  for (size_t t = 0; t < n_tok; ++t)
    for (size_t r = 0; r < rows; ++r) y[t * rows + r] = DotSeq(w.data() + r * cols, x + t * cols, cols);
  return y;
}

void ExpectBitsEqual(const float* a, const float* b, size_t n, const std::string& what) {
  ASSERT_EQ(std::memcmp(a, b, n * sizeof(float)), 0) << what;
}

void CheckShape(std::mt19937& rng, size_t rows, size_t cols, size_t n_tok, bool special) {
  std::vector<float> w_widened;
  const std::vector<uint8_t> bf16 = ToBf16Bytes(RandomValues(rng, rows * cols, special), &w_widened);
  std::vector<float> xbuf = RandomValues(rng, n_tok * cols + 1, special);
  const float* x = xbuf.data() + 1;  // not 64-byte aligned
  const std::vector<float> want = Reference(w_widened, rows, cols, x, n_tok);
  const PackedMatrix packed[] = {PackedMatrix::FromBf16Bytes(bf16, rows, cols, WeightType::kBf16),
                                 PackedMatrix::FromBf16Bytes(bf16, rows, cols, WeightType::kF32),
                                 PackedMatrix::FromF32(w_widened.data(), rows, cols)};
  const std::string shape = std::to_string(rows) + "x" + std::to_string(cols) + " n_tok " +
                            std::to_string(n_tok) + (special ? " special" : "");
  for (const Kernels* k : Tables()) {
    for (const PackedMatrix& m : packed) {
      const size_t ys = rows + 3;  // strided output; the gap must stay untouched
      std::vector<float> y(n_tok * ys + 1, 7.0f);
      const size_t split = m.panels() / 2;  // two ranges, as two threads would
      k->matmul_packed(m, 0, split, x, n_tok, y.data() + 1, ys);
      k->matmul_packed(m, split, m.panels(), x, n_tok, y.data() + 1, ys);
      for (size_t t = 0; t < n_tok; ++t) {
        ExpectBitsEqual(y.data() + 1 + t * ys, want.data() + t * rows, rows,
                        std::string(k->name) + " packed " + shape + " token " + std::to_string(t));
        for (size_t g = rows; g < ys; ++g) ASSERT_EQ(y[1 + t * ys + g], 7.0f) << shape;
      }
    }
    std::vector<float> y(n_tok * rows + 1);
    k->matmul(w_widened.data(), rows, cols, x, n_tok, y.data() + 1);
    ExpectBitsEqual(y.data() + 1, want.data(), n_tok * rows, std::string(k->name) + " rows " + shape);
  }
}

TEST(Kernels, EveryIsaIsListedAndScalarIsFirst) {
  const auto isas = AvailableIsas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), "scalar");
  EXPECT_EQ(KernelsByName("nonsense"), nullptr);
  EXPECT_STREQ(BestKernels().name, isas.back().c_str());
  for (const auto& n : isas) EXPECT_STREQ(KernelsByName(n)->name, n.c_str());
}

TEST(Kernels, GeneratorVaries) {
  std::mt19937 rng(1);
  const auto v = RandomValues(rng, 64, false);
  size_t distinct = 0;
  for (size_t i = 1; i < v.size(); ++i) distinct += v[i] != v[0];
  EXPECT_GT(distinct, 60u);
}

TEST(Kernels, MatmulPackedEqualsScalarOverShapes) {
  std::mt19937 rng(42);
  for (size_t rows : {0, 1, 5, 16, 31, 32, 33, 64, 65, 97, 130}) {
    for (size_t cols : {0, 1, 2, 7, 8, 15, 16, 17, 31, 33, 64, 100}) {
      for (size_t n_tok : {0, 1, 2, 3, 5, 8, 9, 13, 17}) CheckShape(rng, rows, cols, n_tok, false);
    }
  }
}

// Every rows and cols in 0..2x the widest vector (+1), so every tail of
// every lane count and panel is hit.
TEST(Kernels, MatmulPackedEqualsScalarOnEverySmallSize) {
  std::mt19937 rng(11);
  for (size_t rows = 0; rows <= 33; ++rows) {
    for (size_t cols = 0; cols <= 33; ++cols) {
      for (size_t n_tok : {1, 3}) CheckShape(rng, rows, cols, n_tok, false);
    }
  }
}

// Every token count up to two 8-token tiles + 1, so every tile and every
// tail of the multi-token kernels runs, over rows that leave a partial
// last panel and cols past the prefetch distance.
TEST(Kernels, MatmulPackedEqualsScalarOnEveryTokenCount) {
  std::mt19937 rng(5);
  for (size_t n_tok = 1; n_tok <= 17; ++n_tok) {
    for (size_t rows : {1, 31, 50, 96}) {
      for (size_t cols : {1, 19, 131}) CheckShape(rng, rows, cols, n_tok, false);
    }
  }
}

TEST(Kernels, MatmulPackedEqualsScalarWithSpecialValues) {
  std::mt19937 rng(7);
  for (size_t rows : {1, 32, 47, 96}) {
    for (size_t cols : {1, 3, 16, 40, 129}) {
      for (size_t n_tok : {1, 4, 11}) CheckShape(rng, rows, cols, n_tok, true);
    }
  }
}

TEST(Kernels, RegressionOrderSensitiveDot) {  // §5.1: must be exactly +0.0
  const std::vector<float> w = {1e8f, 1.0f, -1e8f};
  const float x[3] = {1.0f, 1.0f, 1.0f};
  const PackedMatrix m = PackedMatrix::FromF32(w.data(), 1, 3);
  for (const Kernels* k : Tables()) {
    float y = -1.0f;
    k->matmul_packed(m, 0, 1, x, 1, &y, 1);
    EXPECT_EQ(Bits(y), 0u) << k->name;
  }
}

void CheckSiluMul(const std::vector<float>& gate, const std::vector<float>& up, const std::string& what) {
  const size_t n = gate.size();
  std::vector<float> want(n);
  SiluMul(gate.data(), up.data(), n, want.data());
  for (const Kernels* k : Tables()) {
    std::vector<float> got(n + 1, 3.0f);
    k->silu_mul(gate.data(), up.data(), n, got.data() + 1);
    ExpectBitsEqual(got.data() + 1, want.data(), n, std::string(k->name) + " silu_mul " + what);
    std::vector<float> inplace = gate;  // out aliasing gate, as the stage calls it
    k->silu_mul(inplace.data(), up.data(), n, inplace.data());
    ExpectBitsEqual(inplace.data(), want.data(), n, std::string(k->name) + " silu_mul in place " + what);
  }
}

TEST(Kernels, SiluMulEqualsScalarOnSizesAndSpecials) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f);
  for (size_t n = 0; n <= 40; ++n) {
    std::vector<float> g(n), u = RandomValues(rng, n, true);
    for (float& x : g) x = wide(rng);
    CheckSiluMul(g, u, "n " + std::to_string(n));
  }
  std::vector<float> g = {0.0f, -0.0f, 88.0f, -88.0f, 87.99f, -87.99f, 88.01f, -88.01f,
                          std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          FromBits(0x7FC00000u), FromBits(0xFFC00000u), FromBits(0x00000001u),
                          FromBits(0x80400000u), 1e-30f, -1e-30f, 0.5f, -0.5f, 1.0f, -1.0f,
                          0.34657359f, -0.34657359f, 1e10f, -1e10f};
  std::vector<float> u(g.size(), 1.0f);
  CheckSiluMul(g, u, "specials");
}

// Every 2^11th bit pattern: all exponents, both signs, NaNs, infinities.
TEST(Kernels, SiluMulEqualsScalarOverBitPatterns) {
  std::vector<float> g, u;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 2048) {
    g.push_back(FromBits(static_cast<uint32_t>(b + (b >> 13) % 2048)));
    u.push_back(FromBits(0x3F800000u + static_cast<uint32_t>(b >> 12) % 4096));
  }
  CheckSiluMul(g, u, "bit patterns");
}

// The layout packed_matrix.h states: panel p, k-row k, row i of the panel
// at element k*kPanelRows + i (f32) or + Bf16Slot(i) (bf16, the low half
// of word i for i < 16, the high half of word i - 16 above).
TEST(PackedMatrix, PanelLayoutIsTheStatedOne) {
  const size_t rows = 70, cols = 5;
  std::vector<uint8_t> bytes(2 * rows * cols);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t k = 0; k < cols; ++k) {  // distinct bf16 bits for every element
      const uint16_t b = static_cast<uint16_t>(0x4000 + r * cols + k);
      bytes[2 * (r * cols + k)] = static_cast<uint8_t>(b & 0xFF);
      bytes[2 * (r * cols + k) + 1] = static_cast<uint8_t>(b >> 8);
    }
  }
  const PackedMatrix h = PackedMatrix::FromBf16Bytes(bytes, rows, cols, WeightType::kBf16);
  const PackedMatrix f = PackedMatrix::FromBf16Bytes(bytes, rows, cols, WeightType::kF32);
  EXPECT_EQ(Bf16Slot(0), 0u);
  EXPECT_EQ(Bf16Slot(15), 30u);
  EXPECT_EQ(Bf16Slot(16), 1u);
  EXPECT_EQ(Bf16Slot(31), 31u);
  for (size_t r = 0; r < rows; ++r) {
    for (size_t k = 0; k < cols; ++k) {
      const size_t p = r / kPanelRows, i = r % kPanelRows;
      const uint16_t want = static_cast<uint16_t>(bytes[2 * (r * cols + k)] | bytes[2 * (r * cols + k) + 1] << 8);
      const size_t word = i < 16 ? i : i - 16;  // the 32-bit word holding row i
      const uint16_t* k_row = h.bf16_panel(p) + k * kPanelRows;
      ASSERT_EQ(k_row[2 * word + (i < 16 ? 0 : 1)], want) << "bf16 row " << r << " col " << k;
      ASSERT_EQ(Bits(f.f32_panel(p)[k * kPanelRows + i]), static_cast<uint32_t>(want) << 16)
          << "f32 row " << r << " col " << k;
    }
  }
  for (size_t i = rows % kPanelRows; i < kPanelRows; ++i) {  // padding rows are zero
    ASSERT_EQ(h.bf16_panel(rows / kPanelRows)[Bf16Slot(i)], 0) << i;
  }
}

TEST(PackedMatrix, Bf16ResidentEqualsWidenAtLoad) {
  std::mt19937 rng(9);
  std::vector<float> widened;
  const auto bytes = ToBf16Bytes(RandomValues(rng, 70 * 45, true), &widened);
  const PackedMatrix a = PackedMatrix::FromBf16Bytes(bytes, 70, 45, WeightType::kBf16);
  const PackedMatrix b = PackedMatrix::FromBf16Bytes(bytes, 70, 45, WeightType::kF32);
  EXPECT_EQ(a.bytes() * 2, b.bytes());
  std::vector<float> ra(45), rb(45);
  for (size_t r = 0; r < 70; ++r) {
    a.CopyRow(r, ra.data());
    b.CopyRow(r, rb.data());
    ExpectBitsEqual(ra.data(), widened.data() + r * 45, 45, "bf16 row");
    ExpectBitsEqual(rb.data(), widened.data() + r * 45, 45, "f32 row");
  }
}

}  // namespace
}  // namespace lockstep::ops
