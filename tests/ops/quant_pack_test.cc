// GGUF rows packed into a PackedMatrix at their own type (quant_panel.h):
// every element read back through At and CopyRow is DequantizeRow's value
// of the row it came from, however the rows were fed (awkward pieces, one
// row at a time to permuted destinations, rows of one panel from two
// threads at once, a pool); bytes() is the resident size the layout
// promises; CheckCols refuses partial blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "engine/ops/packed_matrix.h"
#include "engine/ops/quant_blocks.h"
#include "engine/ops/thread_pool.h"
#include "random_blocks.h"

namespace lockstep::ops {
namespace {

using testing::RandomBlocks;

constexpr WeightType kGgufTypes[] = {WeightType::kF16,  WeightType::kQ8_0, WeightType::kQ4_0,
                                     WeightType::kQ4_K, WeightType::kQ5_K, WeightType::kQ6_K};

const char* Name(WeightType t) { return BlockOf(GgmlTypeOf(t)).name; }

// rows x cols of random valid blocks of `type`, row-major (the file's layout).
std::vector<uint8_t> RandomRows(std::mt19937& rng, WeightType type, size_t rows, size_t cols) {
  const GgmlBlock& b = BlockOf(GgmlTypeOf(type));
  return RandomBlocks(rng, b.type, rows * cols / b.elems);
}

// Every element of m equals DequantizeRow of src row src_of(r), by bits.
template <class SrcOf>
void ExpectRowsAre(const PackedMatrix& m, const std::vector<uint8_t>& file, SrcOf src_of,
                   const std::string& what) {
  const GgmlType g = GgmlTypeOf(m.type());
  const size_t row_bytes = GgmlRowBytes(g, m.cols());
  std::vector<float> want(m.cols()), got(m.cols());
  for (size_t r = 0; r < m.rows(); ++r) {
    DequantizeRow(g, std::span<const uint8_t>(file).subspan(src_of(r) * row_bytes, row_bytes),
                  m.cols(), want.data());
    m.CopyRow(r, got.data());
    ASSERT_EQ(std::memcmp(got.data(), want.data(), 4 * m.cols()), 0) << what << " CopyRow " << r;
    for (size_t k = 0; k < m.cols(); k += 1 + r % 7) {
      ASSERT_EQ(std::bit_cast<uint32_t>(m.At(r, k)), std::bit_cast<uint32_t>(want[k]))
          << what << " At " << r << "," << k;
    }
  }
}

size_t BlockElems(WeightType t) { return BlockOf(GgmlTypeOf(t)).elems; }

TEST(QuantPack, AwkwardPiecesOnOneThreadAndOnAPool) {
  auto pool = ThreadPool::Create(3);
  ASSERT_TRUE(pool.ok());
  std::mt19937 rng(11);
  for (WeightType t : kGgufTypes) {
    const size_t unit = std::max<size_t>(BlockElems(t), 32);
    for (const auto& [rows, blocks] : {std::pair<size_t, size_t>{45, 1}, {64, 2}, {333, 3}, {1, 1}}) {
      const size_t cols = blocks * unit;
      const std::vector<uint8_t> file = RandomRows(rng, t, rows, cols);
      const size_t row_bytes = GgmlRowBytes(GgmlTypeOf(t), cols);
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), pool->get()}) {
        PackedMatrix m = PackedMatrix::Allocated(rows, cols, t);
        for (size_t r = 0; r < rows;) {
          const size_t n = std::min<size_t>(rows - r, 1 + rng() % 80);
          m.PackRows(r, std::span<const uint8_t>(file).subspan(r * row_bytes, n * row_bytes), p);
          r += n;
        }
        ExpectRowsAre(m, file, [](size_t r) { return r; },
                      std::string(Name(t)) + " " + std::to_string(rows) + "x" + std::to_string(cols));
      }
    }
  }
}

// The GGUF loader moves rows (E2.2's q/k un-permute): row r of the file
// packed alone at destination perm[r], in a shuffled order.
TEST(QuantPack, SingleRowsToAnyDestination) {
  std::mt19937 rng(12);
  for (WeightType t : kGgufTypes) {
    const size_t rows = 70, cols = 2 * std::max<size_t>(BlockElems(t), 32);
    const std::vector<uint8_t> file = RandomRows(rng, t, rows, cols);
    const size_t row_bytes = GgmlRowBytes(GgmlTypeOf(t), cols);
    std::vector<size_t> perm(rows), order(rows);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::iota(order.begin(), order.end(), 0);
    std::shuffle(order.begin(), order.end(), rng);
    PackedMatrix m = PackedMatrix::Allocated(rows, cols, t);
    for (size_t r : order) {
      m.PackRows(perm[r], std::span<const uint8_t>(file).subspan(r * row_bytes, row_bytes));
    }
    std::vector<size_t> src(rows);
    for (size_t r = 0; r < rows; ++r) src[perm[r]] = r;
    ExpectRowsAre(m, file, [&](size_t r) { return src[r]; }, Name(t));
  }
}

// Two threads pack the even and the odd rows of the same panels at once.
TEST(QuantPack, RowsOfOnePanelFromTwoThreads) {
  std::mt19937 rng(13);
  for (WeightType t : kGgufTypes) {
    const size_t rows = 96, cols = 4 * std::max<size_t>(BlockElems(t), 32);
    const std::vector<uint8_t> file = RandomRows(rng, t, rows, cols);
    const size_t row_bytes = GgmlRowBytes(GgmlTypeOf(t), cols);
    PackedMatrix m = PackedMatrix::Allocated(rows, cols, t);
    auto pack = [&](size_t parity) {
      for (size_t r = parity; r < rows; r += 2) {
        m.PackRows(r, std::span<const uint8_t>(file).subspan(r * row_bytes, row_bytes));
      }
    };
    std::thread a(pack, 0), b(pack, 1);
    a.join();
    b.join();
    ExpectRowsAre(m, file, [](size_t r) { return r; }, Name(t));
  }
}

// Resident bytes per panel of 32 rows and one block of columns, against
// the file's 32 rows of that block (quant_panel.h's table).
TEST(QuantPack, ResidentBytesAreTheLayouts) {
  struct Want { WeightType type; size_t elems, panel_block, file_block; };
  const Want want[] = {{WeightType::kF16, 1, 64, 64},         {WeightType::kQ8_0, 32, 1088, 1088},
                       {WeightType::kQ4_0, 32, 576, 576},     {WeightType::kQ4_K, 256, 4736, 4608},
                       {WeightType::kQ5_K, 256, 5760, 5632},  {WeightType::kQ6_K, 256, 6720, 6720},
                       {WeightType::kBf16, 1, 64, 64},        {WeightType::kF32, 1, 128, 128}};
  for (const Want& w : want) {
    const size_t cols = 3 * std::max<size_t>(w.elems, 32);
    const PackedMatrix m = PackedMatrix::Allocated(100, cols, w.type);  // 4 panels, the last padded
    EXPECT_EQ(m.PanelBytes(), cols / w.elems * w.panel_block) << Name(w.type);
    EXPECT_EQ(m.bytes(), 4 * m.PanelBytes()) << Name(w.type);
    EXPECT_EQ(GgmlRowBytes(GgmlTypeOf(w.type), cols) * 32, cols / w.elems * w.file_block);
    EXPECT_GE(m.storage_bytes(), m.bytes());
  }
}

TEST(QuantPack, ColumnsMustBeWholeBlocks) {
  EXPECT_TRUE(PackedMatrix::CheckCols(WeightType::kQ4_K, 1536, "w").ok());
  const Status s = PackedMatrix::CheckCols(WeightType::kQ4_K, 576, "blk.3.attn_q.weight");
  EXPECT_EQ(s.kind(), ErrorKind::kInvalid);
  EXPECT_NE(s.message().find("blk.3.attn_q.weight"), std::string::npos) << s.message();
  EXPECT_FALSE(PackedMatrix::CheckCols(WeightType::kQ8_0, 48, "w").ok());
  EXPECT_FALSE(PackedMatrix::CheckCols(WeightType::kQ6_K, 128, "w").ok());
  EXPECT_TRUE(PackedMatrix::CheckCols(WeightType::kQ4_0, 576, "w").ok());
  EXPECT_TRUE(PackedMatrix::CheckCols(WeightType::kF16, 7, "w").ok());
  EXPECT_TRUE(PackedMatrix::CheckCols(WeightType::kBf16, 7, "w").ok());
}

TEST(QuantPack, TypesMapBothWays) {
  for (WeightType t : kGgufTypes) EXPECT_EQ(WeightTypeOf(GgmlTypeOf(t)), t);
  EXPECT_EQ(WeightTypeOf(GgmlType::kBF16), WeightType::kBf16);
  EXPECT_EQ(WeightTypeOf(GgmlType::kF32), WeightType::kF32);
  EXPECT_EQ(QuantPanelOf(WeightType::kF16), nullptr);
  ASSERT_NE(QuantPanelOf(WeightType::kQ6_K), nullptr);
  EXPECT_EQ(QuantPanelOf(WeightType::kQ6_K)->ggml, GgmlType::kQ6_K);
}

}  // namespace
}  // namespace lockstep::ops
