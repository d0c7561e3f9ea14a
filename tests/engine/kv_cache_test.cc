// KvCache layout and span checks (bit-level).
#include <gtest/gtest.h>

#include "engine/kv_cache.h"
#include "engine/ops/rope.h"

namespace lockstep {
namespace {

KvCache MakeCache(int lo, int hi) { return KvCache(lo, hi, 4, 2, ops::InvFreq(10000.0f, 4)); }

TEST(KvCache, SlotsDoNotAliasAcrossLayers) {
  KvCache c = MakeCache(3, 5);
  ASSERT_EQ(c.Append(3, 0), 0u);
  for (int l = 3; l < 5; ++l)
    for (size_t e = 0; e < 3; ++e)
      for (size_t d = 0; d < c.kv_width(); ++d) {
        c.k_row(l, e)[d] = static_cast<float>(l * 1000 + e * 10 + d);
        c.v_row(l, e)[d] = -static_cast<float>(l * 1000 + e * 10 + d);
      }
  for (int l = 3; l < 5; ++l)
    for (size_t e = 0; e < 3; ++e)
      for (size_t d = 0; d < c.kv_width(); ++d) {
        EXPECT_EQ(c.k_data(l)[e * c.kv_width() + d], static_cast<float>(l * 1000 + e * 10 + d));
        EXPECT_EQ(c.v_data(l)[e * c.kv_width() + d], -static_cast<float>(l * 1000 + e * 10 + d));
      }
}

TEST(KvCache, BadEvictionLeavesCacheUnchanged) {
  KvCache c = MakeCache(0, 2);
  c.Append(4, 0);
  c.k_row(1, 2)[1] = 7.0f;
  KvCache before = c.Clone();
  EXPECT_EQ(c.Evict(0, 0).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(c.Evict(3, 2).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(c.Evict(5, 1).kind(), ErrorKind::kInvalid);
  EXPECT_TRUE(c.BitEqual(before));
}

}  // namespace
}  // namespace lockstep
