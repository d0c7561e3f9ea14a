// PopulateForWrite backs fresh pages without a write, and ResizePopulated
// is vector::resize: same elements, same values, geometric growth.
#include "base/populate.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace lockstep {
namespace {

constexpr size_t kPage = 4096;

// Pages of [p, p + bytes) resident now, by mincore (p page-aligned).
size_t ResidentPages(void* p, size_t bytes) {
  std::vector<unsigned char> in(bytes / kPage);
  if (mincore(p, bytes, in.data()) != 0) return SIZE_MAX;
  size_t n = 0;
  for (unsigned char c : in) n += c & 1;
  return n;
}

TEST(Populate, BacksTheWholePagesOfAFreshMappingBeforeAnyWrite) {
  const size_t bytes = 64 * kPage;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* p = static_cast<uint8_t*>(m);
  ASSERT_EQ(ResidentPages(p, bytes), 0u);
  // From the middle of page 1 to the middle of page 10: pages 2..9 only.
  if (!PopulateForWrite(p + kPage + 100, 9 * kPage)) {
    munmap(m, bytes);
    GTEST_SKIP() << "this kernel has no MADV_POPULATE_WRITE";
  }
  EXPECT_EQ(ResidentPages(p, bytes), 8u);
  EXPECT_EQ(ResidentPages(p + 2 * kPage, 8 * kPage), 8u);
  EXPECT_EQ(p[2 * kPage], 0);  // anonymous memory still reads zero
  munmap(m, bytes);
}

TEST(Populate, RangesWithoutAWholePageAreANoOp) {
  uint8_t buf[100] = {1, 2, 3};
  EXPECT_TRUE(PopulateForWrite(buf, sizeof buf));
  EXPECT_TRUE(PopulateForWrite(buf, 0));
  EXPECT_EQ(buf[2], 3);
}

TEST(Populate, ResizePopulatedKeepsTheElementsAndFillsTheNewOnes) {
  std::vector<float> v{1.5f, -2.0f, 3.25f};
  ResizePopulated(v, 100000, 7.0f);  // past capacity: moved to new storage
  ASSERT_EQ(v.size(), 100000u);
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[1], -2.0f);
  EXPECT_EQ(v[2], 3.25f);
  for (size_t i = 3; i < v.size(); ++i) ASSERT_EQ(v[i], 7.0f) << i;
  ResizePopulated(v, 10);  // shrinks as resize does
  EXPECT_EQ(v.size(), 10u);
  v.reserve(50000);
  ResizePopulated(v, 50000, -1.0f);  // within capacity
  EXPECT_EQ(v[9], 7.0f);
  EXPECT_EQ(v[10], -1.0f);
  EXPECT_EQ(v[49999], -1.0f);
}

TEST(Populate, ResizePopulatedGrowsCapacityGeometrically) {
  std::vector<int> v;
  size_t reallocations = 0;
  for (size_t n = 1; n <= 100000; ++n) {
    const size_t before = v.capacity();
    ResizePopulated(v, n, static_cast<int>(n));
    reallocations += v.capacity() != before;
    ASSERT_EQ(v.back(), static_cast<int>(n));
  }
  EXPECT_LE(reallocations, 20u);  // doubling: ~17 for 100000
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], static_cast<int>(i + 1));
}

}  // namespace
}  // namespace lockstep
