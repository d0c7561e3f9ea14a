// SessionHistory: what a remote session did to its cache, in order — every
// feed (its tokens, in the chunks they were sent) and every eviction — so
// that a session reopened on rebuilt stages (after a recovery) can replay
// it and reach the very same cache on every stage (a feed recomputes the
// same entries; KV eviction is exact). Steps relayed and then taken back
// are never recorded. Costs 4 bytes per token fed and one entry per feed or
// eviction.
//
// Invariant: length() is the cache length the history leaves (tokens fed
// minus entries evicted); an eviction is recorded only once validated.
// Thread-compatible; a value type (a fork copies its source's history).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/status.h"

namespace lockstep {

class SessionHistory {
 public:
  // Records a feed of `tokens` (one chunk, however it was sent).
  void Fed(std::span<const uint32_t> tokens);
  // Records an eviction of [from, from + count). REQUIRES: within length().
  void Evicted(uint32_t from, uint32_t count);

  // Calls, in the order recorded, feed(tokens, first_position) for each
  // chunk fed and evict(from, count) for each eviction; stops at the first
  // feed that fails and returns its error.
  using FeedFn = std::function<Status(std::span<const uint32_t> tokens, uint32_t first_position)>;
  using EvictFn = std::function<void(uint32_t from, uint32_t count)>;
  Status Replay(const FeedFn& feed, const EvictFn& evict) const;

  uint32_t length() const { return length_; }
  size_t tokens_fed() const { return fed_.size(); }

 private:
  struct Op {
    bool evict = false;
    uint32_t a = 0;  // feed: tokens taken from fed_; evict: from
    uint32_t b = 0;  // evict: count
  };
  std::vector<uint32_t> fed_;  // every token fed, in order
  std::vector<Op> ops_;
  uint32_t length_ = 0;
};

}  // namespace lockstep
