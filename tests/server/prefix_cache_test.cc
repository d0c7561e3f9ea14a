// PrefixCache: lookups return exactly the shared prefix's rows, respect
// the window key and the byte budget (LRU).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "server/prefix_cache.h"

namespace lockstep::server {
namespace {

// A 2-layer cache whose rows encode (token, position), so copies are checkable.
KvCache Filled(const std::vector<uint32_t>& tokens) {
  KvCache c(0, 2, 4, 1, std::vector<float>{1.0f, 0.5f});
  c.Append(tokens.size(), 0);
  for (int l = 0; l < 2; ++l) {
    for (size_t e = 0; e < tokens.size(); ++e) {
      float k[4], v[4];
      for (int i = 0; i < 4; ++i) {
        k[i] = static_cast<float>(tokens[e] * 100 + e * 10 + i + l);
        c.kraw_row(l, e)[i] = k[i] + 0.5f;
        v[i] = -k[i];
      }
      c.SetK(l, e, k);
      c.SetV(l, e, v);
    }
  }
  return c;
}

const uint64_t kPerPosition = KvBytesOf(Filled({1}));

TEST(PrefixCacheTest, LongestSharedPrefixIsCutExactly) {
  PrefixCache<KvCache> pc(1 << 20, kPerPosition);
  pc.Insert("w-1", std::vector<uint32_t>{1, 2, 3, 4, 5, 6}, Filled({1, 2, 3, 4, 5, 6}));
  auto hit = pc.Lookup("w-1", std::vector<uint32_t>{1, 2, 3, 9, 9}, 4, 2);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->size(), 3u);
  EXPECT_TRUE(hit->BitEqual(Filled({1, 2, 3})));
  // Capped by max_len (a session needs one token of its own).
  auto capped = pc.Lookup("w-1", std::vector<uint32_t>{1, 2, 3, 4, 5, 6}, 5, 2);
  ASSERT_TRUE(capped.has_value());
  EXPECT_TRUE(capped->BitEqual(Filled({1, 2, 3, 4, 5})));
  EXPECT_FALSE(pc.Lookup("w-1", std::vector<uint32_t>{1, 7}, 1, 2).has_value());  // below min_len
  EXPECT_FALSE(pc.Lookup("w8", std::vector<uint32_t>{1, 2, 3, 4}, 3, 2).has_value());  // other window
}

TEST(PrefixCacheTest, BudgetEvictsLeastRecentlyUsed) {
  const uint64_t one = KvBytesOf(Filled({1, 2, 3, 4}));
  PrefixCache<KvCache> pc(2 * one, kPerPosition);
  pc.Insert("w-1", std::vector<uint32_t>{1, 2, 3, 4}, Filled({1, 2, 3, 4}));
  pc.Insert("w-1", std::vector<uint32_t>{5, 6, 7, 8}, Filled({5, 6, 7, 8}));
  ASSERT_TRUE(pc.Lookup("w-1", std::vector<uint32_t>{1, 2, 3, 4, 0}, 4, 2).has_value());  // 1.. now recent
  pc.Insert("w-1", std::vector<uint32_t>{9, 9, 9, 9}, Filled({9, 9, 9, 9}));
  EXPECT_EQ(pc.entries(), 2u);
  EXPECT_LE(pc.bytes(), 2 * one);
  EXPECT_TRUE(pc.Lookup("w-1", std::vector<uint32_t>{1, 2, 3, 4, 0}, 4, 2).has_value());
  EXPECT_FALSE(pc.Lookup("w-1", std::vector<uint32_t>{5, 6, 7, 8, 0}, 4, 2).has_value());
  PrefixCache<KvCache> tiny(one - 1, kPerPosition);
  tiny.Insert("w-1", std::vector<uint32_t>{1, 2, 3, 4}, Filled({1, 2, 3, 4}));
  EXPECT_EQ(tiny.entries(), 0u);
}

}  // namespace
}  // namespace lockstep::server
