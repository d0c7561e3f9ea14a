// matmul_packed over kF16 and quantized PackedMatrix weights, on every
// kernel table this CPU has: memcmp-equal to the scalar reference and to a
// plain sequential dot (§5.2) over DequantizeRow's values, over random
// valid blocks (subnormal, negative, zero and huge f16 scales), rows that
// leave a partial last panel, 1..9 tokens, panel sub-ranges and strided
// outputs, with FTZ/DAZ pinned as in decode.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "engine/ops/dispatch.h"
#include "engine/ops/fp_env.h"
#include "engine/ops/kernels.h"
#include "engine/ops/packed_matrix.h"
#include "engine/ops/quant_blocks.h"
#include "random_blocks.h"
#include "random_values.h"

namespace lockstep::ops {
namespace {

using testing::RandomBlocks;
using testing::RandomValues;

constexpr WeightType kTypes[] = {WeightType::kF16,  WeightType::kQ8_0, WeightType::kQ4_0,
                                 WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K};

struct Case {
  PackedMatrix m;
  std::vector<float> w;  // [rows][cols], DequantizeRow's values
};

Case MakeCase(std::mt19937& rng, WeightType type, size_t rows, size_t cols) {
  const GgmlType g = GgmlTypeOf(type);
  const std::vector<uint8_t> file = RandomBlocks(rng, g, rows * cols / BlockOf(g).elems);
  Case c{PackedMatrix::Allocated(rows, cols, type), std::vector<float>(rows * cols)};
  c.m.PackRows(0, file);
  DequantizeRow(g, file, rows * cols, c.w.data());
  return c;
}

// y[t][r] = dot_seq(w[r], x[t]) from the dequantized rows.
std::vector<float> PlainDots(const Case& c, const float* x, size_t n_tok) {
  const size_t rows = c.m.rows(), cols = c.m.cols();
  std::vector<float> y(n_tok * rows);
  for (size_t t = 0; t < n_tok; ++t) {
    for (size_t r = 0; r < rows; ++r) y[t * rows + r] = DotSeq(c.w.data() + r * cols, x + t * cols, cols);
  }
  return y;
}

// Every table over panel ranges [0, a) and [a, panels) (as two threads
// would run them) into a strided output whose gaps must stay untouched.
void CheckCase(std::mt19937& rng, const Case& c, size_t n_tok, bool special, const std::string& what) {
  const size_t rows = c.m.rows(), cols = c.m.cols();
  std::vector<float> xbuf = RandomValues(rng, n_tok * cols + 1, special);
  const float* x = xbuf.data() + 1;  // not 64-byte aligned
  const std::vector<float> want = PlainDots(c, x, n_tok);
  const size_t split = rng() % (c.m.panels() + 1);
  for (const std::string& isa : AvailableIsas()) {
    const Kernels* k = KernelsByName(isa);
    const size_t ys = rows + 3;
    std::vector<float> y(n_tok * ys + 1, 7.0f);
    k->matmul_packed(c.m, 0, split, x, n_tok, y.data() + 1, ys);
    k->matmul_packed(c.m, split, c.m.panels(), x, n_tok, y.data() + 1, ys);
    for (size_t t = 0; t < n_tok; ++t) {
      ASSERT_EQ(std::memcmp(y.data() + 1 + t * ys, want.data() + t * rows, 4 * rows), 0)
          << isa << " " << what << " n_tok " << n_tok << " token " << t << " split " << split;
      for (size_t gap = rows; gap < ys; ++gap) ASSERT_EQ(y[1 + t * ys + gap], 7.0f) << isa << " " << what;
    }
    ASSERT_EQ(y[0], 7.0f) << isa << " " << what;
  }
}

size_t Unit(WeightType t) {  // the column step of a shape: a block, or 1 for F16
  return BlockOf(GgmlTypeOf(t)).elems;
}

TEST(QuantKernels, EveryTableEqualsThePlainDotOverShapesAndTokenCounts) {
  ASSERT_TRUE(FpEnvironmentPinned());
  std::mt19937 rng(2027);
  for (WeightType t : kTypes) {
    const std::string name = BlockOf(GgmlTypeOf(t)).name;
    const size_t unit = Unit(t);
    const std::vector<size_t> col_units = unit == 1 ? std::vector<size_t>{1, 7, 17, 40, 64}
                                        : unit == 32 ? std::vector<size_t>{1, 3, 7, 18}
                                                     : std::vector<size_t>{1, 2, 3};
    for (size_t rows : {1, 31, 45, 64, 100}) {
      for (size_t cu : col_units) {
        const Case c = MakeCase(rng, t, rows, cu * unit);
        for (size_t n_tok = 1; n_tok <= 9; ++n_tok) {
          CheckCase(rng, c, n_tok, false, name + " " + std::to_string(rows) + "x" + std::to_string(cu * unit));
        }
      }
    }
  }
}

// x with ±0, ±inf, NaN, f32 subnormals (zero under DAZ) and huge values.
TEST(QuantKernels, EveryTableEqualsThePlainDotWithSpecialInputs) {
  std::mt19937 rng(7);
  for (WeightType t : kTypes) {
    const Case c = MakeCase(rng, t, 70, 2 * std::max<size_t>(Unit(t), 32));
    for (size_t n_tok : {1, 2, 5, 9}) CheckCase(rng, c, n_tok, true, BlockOf(GgmlTypeOf(t)).name);
  }
}

// The random blocks really vary: many distinct weights, subnormal-scale
// blocks among them (weights of magnitude below 2^-14 * 64).
TEST(QuantKernels, TheBlocksVary) {
  std::mt19937 rng(3);
  for (WeightType t : kTypes) {
    const Case c = MakeCase(rng, t, 64, 2 * std::max<size_t>(Unit(t), 32));
    std::set<float> distinct(c.w.begin(), c.w.end());
    size_t tiny = 0;
    for (float v : c.w) tiny += v != 0.0f && std::abs(v) < 0x1p-8f;
    EXPECT_GT(distinct.size(), t == WeightType::kQ4_0 ? 120u : 500u) << BlockOf(GgmlTypeOf(t)).name;
    EXPECT_GT(tiny, 100u) << BlockOf(GgmlTypeOf(t)).name;
  }
}

// Subnormal halves are exact normal f32 values, never flushed, although
// DAZ is on: a row of 2^-24 .. 1023 * 2^-24 against x = 1 sums to exactly
// their total in every table (F16C / fcvtl ignore DAZ; scalar widens by
// integer operations), and so do Q8_0 blocks whose scale is one.
TEST(QuantKernels, SubnormalHalvesAreNotFlushedUnderDaz) {
  ASSERT_TRUE(FpEnvironmentPinned());
  const size_t rows = 40, cols = 64;
  std::vector<uint8_t> f16(2 * rows * cols);
  double total = 0;
  for (size_t k = 0; k < cols; ++k) {
    const uint16_t h = static_cast<uint16_t>(1 + 16 * k);  // subnormal halves
    for (size_t r = 0; r < rows; ++r) testing::PutHalf(f16.data() + 2 * (r * cols + k), h);
    total += std::ldexp(static_cast<double>(h), -24);
  }
  PackedMatrix m = PackedMatrix::Allocated(rows, cols, WeightType::kF16);
  m.PackRows(0, f16);
  std::vector<uint8_t> q8(34 * 2 * rows, 0);
  for (size_t b = 0; b < 2 * rows; ++b) {
    testing::PutHalf(q8.data() + 34 * b, 0x0001);  // d = 2^-24
    for (size_t i = 0; i < 32; ++i) q8[34 * b + 2 + i] = static_cast<uint8_t>(i + 1);
  }
  PackedMatrix m8 = PackedMatrix::Allocated(rows, cols, WeightType::kQ8_0);
  m8.PackRows(0, q8);
  const std::vector<float> x(cols, 1.0f);
  const float want_f16 = static_cast<float>(total);                 // exact: < 2^-4, multiples of 2^-24
  const float want_q8 = static_cast<float>(2 * 528 * std::ldexp(1.0, -24));  // 2 * (1 + ... + 32)
  for (const std::string& isa : AvailableIsas()) {
    std::vector<float> y(rows);
    KernelsByName(isa)->matmul_packed(m, 0, m.panels(), x.data(), 1, y.data(), rows);
    for (float v : y) ASSERT_EQ(v, want_f16) << isa;
    KernelsByName(isa)->matmul_packed(m8, 0, m8.panels(), x.data(), 1, y.data(), rows);
    for (float v : y) ASSERT_EQ(v, want_q8) << isa;
  }
}

}  // namespace
}  // namespace lockstep::ops
