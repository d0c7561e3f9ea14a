// The KV memory one cache position takes, the one formula every budget
// uses (the server's session and prefix budgets, a worker's KV budget):
// per layer a K row, a V row and the raw (pre-rotation) K row of kv_width
// floats each, plus the position itself. KvCache holds exactly this.
// Stateless; thread-safe.
#pragma once

#include <cstdint>

#include "engine/io/model_config.h"

namespace lockstep {

constexpr uint64_t KvBytesPerPosition(uint64_t layers, uint64_t kv_width) {
  return 3 * layers * kv_width * sizeof(float) + sizeof(int64_t);
}

// Over layers [lo, hi) of `config`.
inline uint64_t KvBytesPerPosition(const ModelConfig& config, int lo, int hi) {
  return KvBytesPerPosition(static_cast<uint64_t>(hi - lo),
                            static_cast<uint64_t>(config.num_kv_heads) *
                                static_cast<uint64_t>(config.head_dim));
}

}  // namespace lockstep
