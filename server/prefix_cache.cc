#include "server/prefix_cache.h"

namespace lockstep::server {

uint64_t KvBytesOf(const KvCache& cache) {
  const uint64_t layers = static_cast<uint64_t>(cache.hi() - cache.lo());
  return cache.size() * (3 * layers * cache.kv_width() * sizeof(float) + sizeof(int64_t));
}

}  // namespace lockstep::server
