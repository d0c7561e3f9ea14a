#include "server/prefix_cache.h"

#include "engine/kv_bytes.h"

namespace lockstep::server {

uint64_t KvBytesOf(const KvCache& cache) {
  return cache.size() * KvBytesPerPosition(static_cast<uint64_t>(cache.hi() - cache.lo()),
                                           cache.kv_width());
}

}  // namespace lockstep::server
