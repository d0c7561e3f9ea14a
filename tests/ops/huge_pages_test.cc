// FreeHugeBlockBytes reads /proc/buddyinfo's text: free blocks of 2 MB and
// more, zone DMA left out, a line that does not parse counted as nothing.
#include "engine/ops/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace lockstep::ops {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kMiB = size_t{1} << 20;

TEST(HugePages, CountsOnlyBlocksOfTwoMegabytesAndMore) {
  // Orders 0..10 of 4 KB pages: order 9 is 2 MB, order 10 is 4 MB.
  const char* text = "Node 0, zone   Normal    806   3141   3045   4977   3437   1942    840    282     70     25    831 \n";
  EXPECT_EQ(FreeHugeBlockBytes(text, kPage), 25 * 2 * kMiB + 831 * 4 * kMiB);
}

TEST(HugePages, LeavesOutZoneDmaAndSumsTheOthers) {
  const char* text =
      "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n"
      "Node 0, zone    DMA32      4      1      2      2      2      2      1      4      4      2    752 \n"
      "Node 0, zone   Normal      0      0      0      0      0      0      0      0      0      1      0 \n"
      "Node 1, zone   Normal      0      0      0      0      0      0      0      0      0      0      2 \n";
  EXPECT_EQ(FreeHugeBlockBytes(text, kPage), (2 * 2 + 752 * 4) * kMiB + 2 * kMiB + 2 * 4 * kMiB);
}

TEST(HugePages, LargerBasePagesReachTwoMegabytesAtLowerOrders) {
  // 64 KB pages (some arm64 kernels): order 5 is already 2 MB.
  const char* text = "Node 0, zone Normal 9 9 9 9 9 3 1\n";
  EXPECT_EQ(FreeHugeBlockBytes(text, 64 * 1024), 3 * 2 * kMiB + 1 * 4 * kMiB);
}

TEST(HugePages, TextThatDoesNotParseCountsNothing) {
  EXPECT_EQ(FreeHugeBlockBytes("", kPage), 0u);
  EXPECT_EQ(FreeHugeBlockBytes("garbage\n\n", kPage), 0u);
  EXPECT_EQ(FreeHugeBlockBytes("Node 0, zone Normal 1 2 x 4 5 6 7 8 9 10 11\n", kPage), 0u);
  EXPECT_EQ(FreeHugeBlockBytes("Node 0, zone Normal 0 0 0 0 0 0 0 0 0 -1 2\n", kPage), 0u);
  // A good line after a bad one still counts.
  EXPECT_EQ(FreeHugeBlockBytes("Nodes\nNode 0, zone Normal 0 0 0 0 0 0 0 0 0 1\n", kPage),
            2 * kMiB);
}

TEST(HugePages, ABufferSmallerThanOneHugePageNeverAsksFirst) {
  EXPECT_FALSE(HugePagesFreeFor(0));
  EXPECT_FALSE(HugePagesFreeFor(kHugePageBytes - 1));
  // No machine has this much free in 2 MB blocks.
  EXPECT_FALSE(HugePagesFreeFor(size_t{1} << 60));
}

TEST(HugePages, ALargeBufferIsAlignedToAHugePageAndWhollyWritable) {
  const size_t bytes = 3 * kMiB + 5;
  LargeBuffer b = AllocateLarge(bytes);
  ASSERT_NE(b.get(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % kHugePageBytes, 0u);
  // Rounded up to whole huge pages: 4 MB can be written and read back.
  std::memset(b.get(), 0xA5, 2 * kHugePageBytes);
  EXPECT_EQ(b[0], 0xA5);
  EXPECT_EQ(b[2 * kHugePageBytes - 1], 0xA5);
}

}  // namespace
}  // namespace lockstep::ops
