// PrefixCache: prompts already computed, so a request whose prompt shares a
// token prefix with an earlier one starts from a copy of that prefix's KV
// rows instead of recomputing them. What it holds (`Held`) is a computed
// prefix that can be copied and cut: a KvCache in process, or a
// RemoteSession on a cluster (copied by Fork on every worker, cut by Evict
// on every worker; PrefixOps below). Reuse is bit-exact: a position's K/V
// depend only on the tokens up to it (engine/prefix.h), and the copy's tail
// beyond the shared prefix is cut off by Evict, which moves no surviving
// row. Entries are keyed by a string naming everything else the rows or
// the held state depend on (the window; on a cluster also the session's
// sampling, which the workers fix at SessionOpen), so entries of different
// keys never mix. Bounded by a byte budget (positions held x bytes per
// position, wherever the rows live); least recently used entries go first.
// Thread-compatible (the scheduler thread owns it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "coordinator/coordinator.h"
#include "engine/kv_cache.h"

namespace lockstep::server {

// How a held prefix is copied (with room for `reserve` positions, a hint),
// cut to its first n positions, and measured.
template <class Held>
struct PrefixOps;

template <>
struct PrefixOps<KvCache> {
  static std::optional<KvCache> Copy(const KvCache& c, uint32_t reserve) {
    KvCache copy = c.Clone();
    copy.Reserve(reserve);
    return copy;
  }
  static bool Cut(KvCache& c, size_t n) { return c.Evict(n, c.size() - n).ok(); }
  static size_t Length(const KvCache& c) { return c.size(); }
};

template <>
struct PrefixOps<std::unique_ptr<RemoteSession>> {
  using Held = std::unique_ptr<RemoteSession>;
  static std::optional<Held> Copy(const Held& s, uint32_t reserve) {
    Result<Held> f = s->Fork(reserve);
    if (!f.ok()) return std::nullopt;
    return std::move(*f);
  }
  static bool Cut(Held& s, size_t n) {
    return s->Evict(static_cast<uint32_t>(n), static_cast<uint32_t>(s->CacheLength() - n)).ok();
  }
  static size_t Length(const Held& s) { return s->CacheLength(); }
};

template <class Held>
class PrefixCache {
  using Ops = PrefixOps<Held>;

 public:
  // max_entries: entries held at most (0: only the byte budget bounds them).
  PrefixCache(uint64_t budget_bytes, uint64_t bytes_per_position, size_t max_entries = 0)
      : budget_(budget_bytes), per_position_(bytes_per_position), max_entries_(max_entries) {}

  // A copy of the longest cached prefix of `prompt` no longer than max_len,
  // holding exactly that many positions, with room reserved for `reserve`
  // (the positions its request reaches: a hint); nullopt on a miss or when
  // the longest shared prefix is shorter than min_len.
  std::optional<Held> Lookup(const std::string& key, std::span<const uint32_t> prompt,
                             size_t max_len, size_t min_len, uint32_t reserve = 0) {
    auto best = entries_.end();
    size_t best_len = 0;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->key != key) continue;
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
    std::optional<Held> copy = Ops::Copy(best->held, reserve);
    if (!copy) {  // the held prefix is unusable (gone from a worker): dropped
      bytes_ -= best->bytes;
      entries_.erase(best);
      return std::nullopt;
    }
    if (Ops::Length(*copy) > best_len && !Ops::Cut(*copy, best_len)) return std::nullopt;
    return copy;
  }

  // Stores a copy of `held` (which holds exactly `prompt`), evicting LRU
  // entries to fit; a prefix bigger than the whole budget is not stored.
  void Insert(const std::string& key, std::span<const uint32_t> prompt, const Held& held) {
    const uint64_t need = Ops::Length(held) * per_position_;
    if (need > budget_) return;
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->key == key && it->tokens.size() >= prompt.size() &&
          std::equal(prompt.begin(), prompt.end(), it->tokens.begin())) {
        entries_.splice(entries_.begin(), entries_, it);  // already covered
        return;
      }
    }
    // Room first, then the copy: on a cluster an entry is a session on
    // every worker, and the old one goes before the new one exists.
    while (!entries_.empty() &&
           (bytes_ + need > budget_ || (max_entries_ > 0 && entries_.size() >= max_entries_))) {
      DropOldest();
    }
    if (max_entries_ > 0 && entries_.size() >= max_entries_) return;
    std::optional<Held> copy = Ops::Copy(held, 0);
    if (!copy) return;
    entries_.push_front(
        Entry{key, std::vector<uint32_t>(prompt.begin(), prompt.end()), std::move(*copy), need});
    bytes_ += need;
  }

  // Drops the least recently used entry; false when there is none.
  bool DropOldest() {
    if (entries_.empty()) return false;
    bytes_ -= entries_.back().bytes;
    entries_.pop_back();
    return true;
  }
  // Drops every entry of `key` that starts with `tokens` (a prefix found
  // unusable after its copy was taken).
  void Forget(const std::string& key, std::span<const uint32_t> tokens) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      const bool match = it->key == key && it->tokens.size() >= tokens.size() &&
                         std::equal(tokens.begin(), tokens.end(), it->tokens.begin());
      if (!match) {
        ++it;
        continue;
      }
      bytes_ -= it->bytes;
      it = entries_.erase(it);
    }
  }
  uint64_t bytes() const { return bytes_; }
  size_t entries() const { return entries_.size(); }

 private:
  struct Entry {
    std::string key;
    std::vector<uint32_t> tokens;
    Held held;
    uint64_t bytes;
  };
  uint64_t budget_;
  uint64_t per_position_;
  size_t max_entries_;
  uint64_t bytes_ = 0;
  std::list<Entry> entries_;  // most recently used first
};

// Bytes one KvCache holds: positions x (K, V, raw K rows per layer + position).
uint64_t KvBytesOf(const KvCache& cache);

}  // namespace lockstep::server
