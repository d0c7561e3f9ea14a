// PrefixCache: KV caches of prompts already computed, so a request whose
// prompt shares a token prefix with an earlier one starts from a copy of
// that prefix's KV rows instead of recomputing them. Reuse is bit-exact:
// a position's K/V depend only on the tokens up to it (engine/prefix.h),
// and the copy's tail beyond the shared prefix is cut off by Evict, which
// moves no surviving row. Entries are keyed by (window, token ids); the
// window changes every row, so entries of different windows never mix.
// Bounded by a byte budget, least recently used entries go first.
// Thread-compatible (the scheduler thread owns it).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <span>
#include <vector>

#include "engine/kv_cache.h"

namespace lockstep::server {

class PrefixCache {
 public:
  explicit PrefixCache(uint64_t budget_bytes) : budget_(budget_bytes) {}

  // The longest cached prefix of `prompt` no longer than max_len, as a
  // fresh cache holding exactly that many positions; nullopt on a miss or
  // when the longest shared prefix is shorter than min_len.
  std::optional<KvCache> Lookup(int window, std::span<const uint32_t> prompt, size_t max_len,
                                size_t min_len);
  // Stores a copy of `cache` (which holds exactly `prompt`), evicting LRU
  // entries to fit; a cache bigger than the whole budget is not stored.
  void Insert(int window, std::span<const uint32_t> prompt, const KvCache& cache);

  uint64_t bytes() const { return bytes_; }
  size_t entries() const { return entries_.size(); }

  static uint64_t BytesOf(const KvCache& cache);

 private:
  struct Entry {
    int window;
    std::vector<uint32_t> tokens;
    KvCache cache;
    uint64_t bytes;
  };
  uint64_t budget_;
  uint64_t bytes_ = 0;
  std::list<Entry> entries_;  // most recently used first
};

}  // namespace lockstep::server
