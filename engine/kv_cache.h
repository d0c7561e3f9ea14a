// KvCache: the attention state of one session for the layers [lo, hi) of
// a model — all of them in a monolithic run, one stage's share on a worker.
//
// Layout, per held layer l and kv head h (entries grouped in tiles of
// ops::kKvTile; the padding lanes of the last tile are zero):
//   k    [tiles][head_dim][kKvTile]  post-RoPE K (§7.4), read by attention:
//                                    lane i of tile t is entry t*kKvTile+i
//   v    [tiles*kKvTile][head_dim]   V (never rotated)
// per held layer l:
//   kraw [entries][kv_heads*head_dim]  K before RoPE (re-rotated on eviction)
// and one list shared by every layer:
//   positions [entries]  absolute RoPE position of each entry, increasing
// Entry e of every layer was produced by the token at positions[e]. The
// tiles let attention load K contiguously across keys (docs/kv_cache.md).
//
// Invariants: all layers hold the same number of entries; for every entry,
// k == RoPE(kraw, positions[e]) in one rotation (§7.4).
// A window W > 0 on a layer restricts a query at position p to entries
// whose stored position >= p - W + 1 (keyed off positions, not indices);
// W == 0 is plain causal attention.
// Thread-compatible: one session is driven by one thread at a time.
// Copying is explicit (Clone) because a cache can be large.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace lockstep {

class KvCache {
 public:
  // REQUIRES: lo <= hi; inv_freq has head_dim/2 entries (used to re-rotate
  // K after an eviction).
  KvCache(int lo, int hi, int head_dim, int kv_heads, std::vector<float> inv_freq);
  KvCache(KvCache&&) noexcept = default;
  KvCache& operator=(KvCache&&) noexcept = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;

  // A byte-exact deep copy (prefix reuse).
  KvCache Clone() const;

  int lo() const { return lo_; }
  int hi() const { return hi_; }
  size_t size() const { return positions_.size(); }
  size_t kv_width() const { return kv_width_; }
  size_t head_dim() const { return head_dim_; }
  size_t tiles() const;  // tiles per (layer, kv head): ceil(size / kKvTile)
  std::span<const int64_t> positions() const { return positions_; }

  // Grows every buffer to hold `entries` entries, so appending up to
  // that many does not allocate. Contents are unchanged.
  void Reserve(size_t entries);

  // Appends n entries at positions first_pos .. first_pos+n-1 to every
  // layer (zeroed, to be written by the forward pass). Returns the index
  // of the first new entry. REQUIRES first_pos > last position.
  size_t Append(size_t n, int64_t first_pos);

  // One entry's row of every kv head, [kv_heads][head_dim] (kv_width
  // floats). REQUIRES lo <= layer < hi, entry < size().
  void SetK(int layer, size_t entry, const float* row);  // post-RoPE
  void SetV(int layer, size_t entry, const float* row);
  void GetK(int layer, size_t entry, float* row) const;
  void GetV(int layer, size_t entry, float* row) const;
  float* kraw_row(int layer, size_t entry);
  const float* kraw_data(int layer) const;  // [size()][kv_width]

  // Attention's views of one kv head (layout above). REQUIRES h < kv_heads.
  const float* k_tiles(int layer, size_t h) const;  // [tiles()][head_dim][kKvTile]
  const float* v_rows(int layer, size_t h) const;   // [tiles()*kKvTile][head_dim]

  // Removes entries [from, from+count) from every layer; survivors are
  // renumbered to their index and each survivor whose position changed
  // gets K re-derived from Kraw by one rotation at the new position (Kraw
  // and V move as bytes). Capacity is kept; nothing is allocated.
  // Invalid (cache unchanged) if count == 0 or the span exceeds size().
  Status Evict(size_t from, size_t count);

  // Sliding window per absolute layer; 0 = none. Invalid for W < 0.
  Status SetWindow(int layer, int window);
  int window(int layer) const { return windows_[static_cast<size_t>(layer - lo_)]; }

  // First entry visible to a query at position pos on `layer`, given
  // entries [0, end) exist (§ window rule above).
  size_t FirstVisible(int layer, int64_t pos, size_t end) const;

  // Byte equality of K, Kraw, V, positions and windows (for tests).
  bool BitEqual(const KvCache& other) const;

 private:
  KvCache() = default;
  size_t Index(int layer) const { return static_cast<size_t>(layer - lo_); }
  size_t Head(int layer, size_t h) const { return Index(layer) * kv_heads_ + h; }
  void Resize(size_t old, size_t entries);  // every buffer, padding kept zero
  void MoveEntry(size_t from, size_t to);
  void Rerotate(size_t entry);

  int lo_ = 0;
  int hi_ = 0;
  size_t head_dim_ = 0;
  size_t kv_heads_ = 0;
  size_t kv_width_ = 0;
  std::vector<float> inv_freq_;               // [head_dim/2]
  std::vector<std::vector<float>> k_;         // [layers*kv_heads][tiles][head_dim][kKvTile]
  std::vector<std::vector<float>> v_;         // [layers*kv_heads][tiles*kKvTile][head_dim]
  std::vector<std::vector<float>> kraw_;      // [layers][entries*kv_width]
  std::vector<int64_t> positions_;            // [entries]
  std::vector<int> windows_;                  // [layers]
  std::vector<float> cos_, sin_;              // [head_dim/2], Rerotate scratch
  std::vector<float> row_;                    // [kv_width], Rerotate scratch
};

}  // namespace lockstep
