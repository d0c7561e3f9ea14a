#include "engine/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <string>

#include "engine/ops/kernels.h"
#include "base/populate.h"
#include "engine/ops/rope.h"

namespace lockstep {
namespace {

constexpr size_t kTile = ops::kKvTile;

size_t TilesFor(size_t entries) { return (entries + kTile - 1) / kTile; }

// Lane d of entry e in a [tiles][head_dim][kTile] buffer.
size_t KAt(size_t e, size_t d, size_t hd) { return (e / kTile) * hd * kTile + d * kTile + e % kTile; }

}  // namespace

KvCache::KvCache(int lo, int hi, int head_dim, int kv_heads, std::vector<float> inv_freq)
    : lo_(lo),
      hi_(hi),
      head_dim_(static_cast<size_t>(head_dim)),
      kv_heads_(static_cast<size_t>(kv_heads)),
      kv_width_(static_cast<size_t>(kv_heads) * static_cast<size_t>(head_dim)),
      inv_freq_(std::move(inv_freq)),
      k_(static_cast<size_t>(hi - lo) * static_cast<size_t>(kv_heads)),
      v_(static_cast<size_t>(hi - lo) * static_cast<size_t>(kv_heads)),
      kraw_(static_cast<size_t>(hi - lo)),
      windows_(static_cast<size_t>(hi - lo), 0),
      cos_(inv_freq_.size()),
      sin_(inv_freq_.size()),
      row_(kv_width_) {
  assert(lo <= hi);
  assert(inv_freq_.size() * 2 == head_dim_);
}

KvCache KvCache::Clone() const {
  KvCache c;
  c.lo_ = lo_;
  c.hi_ = hi_;
  c.head_dim_ = head_dim_;
  c.kv_heads_ = kv_heads_;
  c.kv_width_ = kv_width_;
  c.inv_freq_ = inv_freq_;
  c.k_ = k_;
  c.v_ = v_;
  c.kraw_ = kraw_;
  c.positions_ = positions_;
  c.windows_ = windows_;
  c.cos_ = cos_;
  c.sin_ = sin_;
  c.row_ = row_;
  return c;
}

size_t KvCache::tiles() const { return TilesFor(size()); }

void KvCache::Reserve(size_t entries) {
  positions_.reserve(entries);
  const size_t padded = TilesFor(entries) * kTile * head_dim_;
  for (size_t i = 0; i < k_.size(); ++i) {
    k_[i].reserve(padded);
    v_[i].reserve(padded);
  }
  for (std::vector<float>& rows : kraw_) rows.reserve(entries * kv_width_);
}

// Every buffer from `old` to `entries` entries. New lanes arrive zeroed
// (new tiles from resize, the last tile's padding by the invariant); when
// shrinking, the lanes left behind in the new last tile are zeroed.
void KvCache::Resize(size_t old, size_t entries) {
  const size_t padded = TilesFor(entries) * kTile, hd = head_dim_;
  const size_t dirty = std::min(old, padded);  // lanes [entries, dirty) hold old entries
  for (size_t i = 0; i < k_.size(); ++i) {
    ResizePopulated(k_[i], padded * hd, 0.0f);
    ResizePopulated(v_[i], padded * hd, 0.0f);
    for (size_t e = entries; e < dirty; ++e) {
      for (size_t d = 0; d < hd; ++d) k_[i][KAt(e, d, hd)] = 0.0f;
      std::fill_n(v_[i].begin() + static_cast<ptrdiff_t>(e * hd), hd, 0.0f);
    }
  }
  for (std::vector<float>& rows : kraw_) ResizePopulated(rows, entries * kv_width_, 0.0f);
}

size_t KvCache::Append(size_t n, int64_t first_pos) {
  assert(positions_.empty() || first_pos > positions_.back());
  const size_t start = positions_.size();
  for (size_t i = 0; i < n; ++i) positions_.push_back(first_pos + static_cast<int64_t>(i));
  Resize(start, positions_.size());
  return start;
}

void KvCache::SetK(int layer, size_t e, const float* row) {
  for (size_t h = 0; h < kv_heads_; ++h) {
    float* k = k_[Head(layer, h)].data();
    for (size_t d = 0; d < head_dim_; ++d) k[KAt(e, d, head_dim_)] = row[h * head_dim_ + d];
  }
}

void KvCache::GetK(int layer, size_t e, float* row) const {
  for (size_t h = 0; h < kv_heads_; ++h) {
    const float* k = k_[Head(layer, h)].data();
    for (size_t d = 0; d < head_dim_; ++d) row[h * head_dim_ + d] = k[KAt(e, d, head_dim_)];
  }
}

void KvCache::SetV(int layer, size_t e, const float* row) {
  for (size_t h = 0; h < kv_heads_; ++h) {
    std::memcpy(v_[Head(layer, h)].data() + e * head_dim_, row + h * head_dim_,
                head_dim_ * sizeof(float));
  }
}

void KvCache::GetV(int layer, size_t e, float* row) const {
  for (size_t h = 0; h < kv_heads_; ++h) {
    std::memcpy(row + h * head_dim_, v_[Head(layer, h)].data() + e * head_dim_,
                head_dim_ * sizeof(float));
  }
}

float* KvCache::kraw_row(int layer, size_t e) { return kraw_[Index(layer)].data() + e * kv_width_; }
const float* KvCache::kraw_data(int layer) const { return kraw_[Index(layer)].data(); }
const float* KvCache::k_tiles(int layer, size_t h) const { return k_[Head(layer, h)].data(); }
const float* KvCache::v_rows(int layer, size_t h) const { return v_[Head(layer, h)].data(); }

// Entry `from` of every buffer to index `to` (bytes only).
void KvCache::MoveEntry(size_t from, size_t to) {
  const size_t hd = head_dim_;
  for (size_t i = 0; i < k_.size(); ++i) {
    for (size_t d = 0; d < hd; ++d) k_[i][KAt(to, d, hd)] = k_[i][KAt(from, d, hd)];
    std::memmove(v_[i].data() + to * hd, v_[i].data() + from * hd, hd * sizeof(float));
  }
  for (std::vector<float>& rows : kraw_) {
    std::memmove(rows.data() + to * kv_width_, rows.data() + from * kv_width_,
                 kv_width_ * sizeof(float));
  }
}

// K = RoPE(Kraw, positions[e]) in one rotation (§7.3-7.4), never by
// rotating the old K by the position delta: composed rotations round
// differently and would not equal a run that never saw the evicted span.
void KvCache::Rerotate(size_t e) {
  ops::RopeAngles(inv_freq_, positions_[e], cos_, sin_);
  for (int l = lo_; l < hi_; ++l) {
    std::span<const float> raw(kraw_row(l, e), kv_width_);
    ops::RotateHalfFrom(raw, row_, static_cast<int>(head_dim_), cos_, sin_);
    SetK(l, e, row_.data());
  }
}

Status KvCache::Evict(size_t from, size_t count) {
  const size_t len = positions_.size();
  if (count == 0) {
    return InvalidError("evict: empty span (count 0) at entry " + std::to_string(from));
  }
  if (from > len || count > len - from) {
    if (count > std::numeric_limits<size_t>::max() - from) {  // from + count overflows
      return InvalidError("evict: span of " + std::to_string(count) + " entries from " +
                          std::to_string(from) + " exceeds cache length " + std::to_string(len));
    }
    return InvalidError("evict: span [" + std::to_string(from) + ", " +
                        std::to_string(from + count) + ") exceeds cache length " +
                        std::to_string(len));
  }
  for (size_t e = from; e + count < len; ++e) MoveEntry(e + count, e);  // splice
  Resize(len, len - count);
  positions_.erase(positions_.begin() + static_cast<ptrdiff_t>(from),
                   positions_.begin() + static_cast<ptrdiff_t>(from + count));
  for (size_t e = 0; e < positions_.size(); ++e) {
    if (positions_[e] == static_cast<int64_t>(e)) continue;
    positions_[e] = static_cast<int64_t>(e);
    Rerotate(e);
  }
  return Status::Ok();
}

Status KvCache::SetWindow(int layer, int window) {
  if (layer < lo_ || layer >= hi_) {
    return InvalidError("window: layer " + std::to_string(layer) + " is not held by this cache");
  }
  if (window < 0) return InvalidError("window must be >= 0, got " + std::to_string(window));
  windows_[Index(layer)] = window;
  return Status::Ok();
}

size_t KvCache::FirstVisible(int layer, int64_t pos, size_t end) const {
  const int w = windows_[Index(layer)];
  if (w <= 0) return 0;
  const int64_t bound = pos - static_cast<int64_t>(w) + 1;
  // positions_ increases, so the visible entries are a suffix of [0, end).
  const auto first = positions_.begin();
  return static_cast<size_t>(std::lower_bound(first, first + static_cast<ptrdiff_t>(end), bound) -
                             first);
}

bool KvCache::BitEqual(const KvCache& o) const {
  auto same = [](const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].size() != b[i].size()) return false;
      if (!a[i].empty() && std::memcmp(a[i].data(), b[i].data(), a[i].size() * sizeof(float)) != 0) {
        return false;
      }
    }
    return true;
  };
  return lo_ == o.lo_ && hi_ == o.hi_ && kv_width_ == o.kv_width_ && positions_ == o.positions_ &&
         windows_ == o.windows_ && same(k_, o.k_) && same(v_, o.v_) && same(kraw_, o.kraw_);
}

}  // namespace lockstep
