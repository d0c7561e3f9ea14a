// engine/kv_bytes.h: the bytes one cache position takes, the one formula
// the server's budgets and a worker's KV budget use.
#include "engine/kv_bytes.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

TEST(KvBytes, APositionHoldsKPreRopeKAndVOfEveryLayerAndItsPosition) {
  ModelConfig c;
  c.num_layers = 5;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  // Layers [1, 4): 3 layers x 16 floats x (K, pre-RoPE K, V) x 4 bytes,
  // plus an int64 position.
  EXPECT_EQ(KvBytesPerPosition(c, 1, 4), 3u * 16u * 3u * 4u + 8u);
  EXPECT_EQ(KvBytesPerPosition(c, 0, 5), 5u * 16u * 3u * 4u + 8u);
  EXPECT_EQ(KvBytesPerPosition(c, 2, 2), 8u) << "no layer: the position alone";
}

}  // namespace
}  // namespace lockstep
