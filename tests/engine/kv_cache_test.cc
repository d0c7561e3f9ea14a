// KvCache layout and span checks (bit-level).
#include <gtest/gtest.h>

#include <vector>

#include "engine/kv_cache.h"
#include "engine/ops/kernels.h"
#include "engine/ops/rope.h"

namespace lockstep {
namespace {

KvCache MakeCache(int lo, int hi) { return KvCache(lo, hi, 4, 2, ops::InvFreq(10000.0f, 4)); }

TEST(KvCache, SlotsDoNotAliasAcrossLayers) {
  KvCache c = MakeCache(3, 5);
  ASSERT_EQ(c.Append(3, 0), 0u);
  std::vector<float> row(c.kv_width());
  for (int l = 3; l < 5; ++l)
    for (size_t e = 0; e < 3; ++e) {
      for (size_t d = 0; d < c.kv_width(); ++d) row[d] = static_cast<float>(l * 1000 + e * 10 + d);
      c.SetK(l, e, row.data());
      for (float& x : row) x = -x;
      c.SetV(l, e, row.data());
    }
  for (int l = 3; l < 5; ++l)
    for (size_t e = 0; e < 3; ++e) {
      c.GetK(l, e, row.data());
      for (size_t d = 0; d < c.kv_width(); ++d) EXPECT_EQ(row[d], static_cast<float>(l * 1000 + e * 10 + d));
      c.GetV(l, e, row.data());
      for (size_t d = 0; d < c.kv_width(); ++d) EXPECT_EQ(row[d], -static_cast<float>(l * 1000 + e * 10 + d));
    }
}

// The documented tile layout: K of (layer, head h, entry e, lane d) at
// k_tiles(l, h)[(e / T) * head_dim * T + d * T + e % T], V at
// v_rows(l, h)[e * head_dim + d]; padding lanes are zero, also after an
// eviction frees them.
TEST(KvCache, TileLayoutAndZeroPadding) {
  constexpr size_t T = ops::kKvTile, hd = 4;
  KvCache c = MakeCache(0, 2);
  const size_t n = T + 3;
  c.Append(n, 0);
  ASSERT_EQ(c.tiles(), 2u);
  std::vector<float> row(c.kv_width());
  auto value = [](int l, size_t e, size_t h, size_t d) {
    return static_cast<float>(1 + l * 10000 + static_cast<int>(e * 100 + h * 10 + d));
  };
  for (int l = 0; l < 2; ++l)
    for (size_t e = 0; e < n; ++e) {
      for (size_t h = 0; h < 2; ++h)
        for (size_t d = 0; d < hd; ++d) row[h * hd + d] = value(l, e, h, d);
      c.SetK(l, e, row.data());
      c.SetV(l, e, row.data());
    }
  auto check = [&](size_t size) {
    for (int l = 0; l < 2; ++l)
      for (size_t h = 0; h < 2; ++h)
        for (size_t e = 0; e < c.tiles() * T; ++e)
          for (size_t d = 0; d < hd; ++d) {
            const float want = e < size ? value(l, e, h, d) : 0.0f;
            EXPECT_EQ(c.k_tiles(l, h)[(e / T) * hd * T + d * T + e % T], want) << e;
            EXPECT_EQ(c.v_rows(l, h)[e * hd + d], want) << e;
          }
  };
  check(n);
  ASSERT_TRUE(c.Evict(n - 2, 2).ok());  // the newest span: nothing moves or re-rotates
  check(n - 2);
  c.Append(2, static_cast<int64_t>(n - 2));  // the freed lanes come back zeroed
  for (int l = 0; l < 2; ++l)
    for (size_t e = n - 2; e < n; ++e) {
      c.GetK(l, e, row.data());
      for (float x : row) EXPECT_EQ(x, 0.0f);
    }
}

TEST(KvCache, BadEvictionLeavesCacheUnchanged) {
  KvCache c = MakeCache(0, 2);
  c.Append(4, 0);
  const float row[4] = {0.0f, 7.0f, 0.0f, 0.0f};
  c.SetK(1, 2, row);
  KvCache before = c.Clone();
  EXPECT_EQ(c.Evict(0, 0).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(c.Evict(3, 2).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(c.Evict(5, 1).kind(), ErrorKind::kInvalid);
  EXPECT_TRUE(c.BitEqual(before));
}

}  // namespace
}  // namespace lockstep
