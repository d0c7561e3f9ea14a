// The panel packers against the element-by-element definition of the bf16
// panel layout (packed_matrix.h), and PackBf16Rows, fed in pieces that
// start and end mid-panel, against the same definition.
#include "engine/ops/pack_bf16.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/ops/packed_matrix.h"
#include "engine/ops/thread_pool.h"

#include "tests/random_bytes.h"

namespace lockstep::ops {
namespace {

using testing::RandomBytes;

uint16_t U16At(const uint8_t* p) { return static_cast<uint16_t>(p[0] | p[1] << 8); }

// Row i of the panel, column k, where the layout says it is: the low half
// of 32-bit word i of k-row k for i < 16, the high half of word i - 16.
uint16_t Defined(const uint16_t* panel, size_t i, size_t k) {
  const size_t word = i < 16 ? i : i - 16;
  return panel[k * kPanelRows + 2 * word + (i < 16 ? 0 : 1)];
}

void ExpectPanelIsRows(const uint16_t* panel, const uint8_t* rows, size_t row_bytes,
                       size_t cols, const char* what) {
  for (size_t i = 0; i < kPanelRows; ++i) {
    for (size_t k = 0; k < cols; ++k) {
      ASSERT_EQ(Defined(panel, i, k), U16At(rows + i * row_bytes + 2 * k))
          << what << ": cols " << cols << " row " << i << " col " << k;
    }
  }
}

TEST(PackBf16Panel, EveryPackerPlacesEveryElementAsDefined) {
  std::vector<std::pair<const char*, PackBf16PanelFn>> packers = {
      {"scalar", &PackBf16PanelScalar}};
#if defined(__x86_64__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")) {
    packers.push_back({"avx512", &PackBf16PanelAvx512});
  }
#endif
  for (size_t cols : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{33}, size_t{2053}}) {
    // Rows a few bytes apart beyond their length, and starting off alignment.
    const size_t row_bytes = 2 * cols + 6;
    const std::vector<uint8_t> src = RandomBytes(1 + kPanelRows * row_bytes, static_cast<uint32_t>(cols));
    for (const auto& [name, pack] : packers) {
      std::vector<uint16_t> panel(cols * kPanelRows + 1, 0xDEAD);
      pack(src.data() + 1, row_bytes, cols, panel.data());
      ExpectPanelIsRows(panel.data(), src.data() + 1, row_bytes, cols, name);
      EXPECT_EQ(panel.back(), 0xDEAD) << name << ": wrote past the panel, cols " << cols;
    }
  }
}

TEST(PackBf16Panel, BestIsOneOfThePackers) {
  const PackBf16PanelFn best = BestPackBf16Panel();
#if defined(__x86_64__)
  EXPECT_TRUE(best == &PackBf16PanelScalar || best == &PackBf16PanelAvx512);
#else
  EXPECT_EQ(best, &PackBf16PanelScalar);
#endif
}

// Pieces cut at arbitrary rows (mid-panel, several panels, one row), on one
// thread and on a pool: every element where the layout defines it.
TEST(PackBf16Panel, RowsPackedInAwkwardPiecesMatchTheDefinition) {
  auto pool = ThreadPool::Create(3);
  ASSERT_TRUE(pool.ok());
  std::mt19937 rng(5);
  for (const auto& [rows, cols] : {std::pair<size_t, size_t>{100, 37}, {64, 16}, {333, 48},
                                   {31, 5}, {1030, 19}}) {
    const std::vector<uint8_t> src = RandomBytes(2 * rows * cols, static_cast<uint32_t>(rows));
    for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), pool->get()}) {
      PackedMatrix m = PackedMatrix::Allocated(rows, cols, WeightType::kBf16);
      for (size_t r = 0; r < rows;) {
        const size_t n = std::min<size_t>(rows - r, 1 + rng() % 80);
        m.PackBf16Rows(r, std::span<const uint8_t>(src).subspan(2 * r * cols, 2 * n * cols), p);
        r += n;
      }
      for (size_t r = 0; r < rows; ++r) {
        for (size_t k = 0; k < cols; ++k) {
          ASSERT_EQ(Defined(m.bf16_panel(r / kPanelRows), r % kPanelRows, k),
                    U16At(src.data() + 2 * (r * cols + k)))
              << rows << "x" << cols << " row " << r << " col " << k;
        }
      }
    }
  }
}

}  // namespace
}  // namespace lockstep::ops
