#include "server/prefix_cache.h"

#include <algorithm>

namespace lockstep::server {

uint64_t PrefixCache::BytesOf(const KvCache& cache) {
  const uint64_t layers = static_cast<uint64_t>(cache.hi() - cache.lo());
  return cache.size() * (3 * layers * cache.kv_width() * sizeof(float) + sizeof(int64_t));
}

std::optional<KvCache> PrefixCache::Lookup(int window, std::span<const uint32_t> prompt,
                                           size_t max_len, size_t min_len) {
  auto best = entries_.end();
  size_t best_len = 0;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->window != window) continue;
    size_t n = 0;
    const size_t limit = std::min({it->tokens.size(), prompt.size(), max_len});
    while (n < limit && it->tokens[n] == prompt[n]) ++n;
    if (n > best_len) {
      best_len = n;
      best = it;
    }
  }
  if (best == entries_.end() || best_len < min_len || best_len == 0) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, best);  // most recently used
  KvCache copy = best->cache.Clone();
  if (copy.size() > best_len) {
    if (!copy.Evict(best_len, copy.size() - best_len).ok()) return std::nullopt;
  }
  return copy;
}

void PrefixCache::Insert(int window, std::span<const uint32_t> prompt, const KvCache& cache) {
  const uint64_t need = BytesOf(cache);
  if (need > budget_) return;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->window == window && it->tokens.size() >= prompt.size() &&
        std::equal(prompt.begin(), prompt.end(), it->tokens.begin())) {
      entries_.splice(entries_.begin(), entries_, it);  // already covered
      return;
    }
  }
  while (bytes_ + need > budget_ && !entries_.empty()) {
    bytes_ -= entries_.back().bytes;
    entries_.pop_back();
  }
  entries_.push_front(Entry{window, std::vector<uint32_t>(prompt.begin(), prompt.end()),
                            cache.Clone(), need});
  bytes_ += need;
}

}  // namespace lockstep::server
