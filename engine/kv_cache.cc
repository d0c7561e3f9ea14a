#include "engine/kv_cache.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>
#include <string>

#include "engine/ops/rope.h"

namespace lockstep {

KvCache::KvCache(int lo, int hi, int head_dim, int kv_heads, std::vector<float> inv_freq)
    : lo_(lo),
      hi_(hi),
      head_dim_(head_dim),
      kv_width_(static_cast<size_t>(kv_heads) * static_cast<size_t>(head_dim)),
      inv_freq_(std::move(inv_freq)),
      k_(static_cast<size_t>(hi - lo)),
      kraw_(static_cast<size_t>(hi - lo)),
      v_(static_cast<size_t>(hi - lo)),
      windows_(static_cast<size_t>(hi - lo), 0),
      cos_(inv_freq_.size()),
      sin_(inv_freq_.size()) {
  assert(lo <= hi);
  assert(inv_freq_.size() * 2 == static_cast<size_t>(head_dim));
}

KvCache KvCache::Clone() const {
  KvCache c;
  c.lo_ = lo_;
  c.hi_ = hi_;
  c.head_dim_ = head_dim_;
  c.kv_width_ = kv_width_;
  c.inv_freq_ = inv_freq_;
  c.k_ = k_;
  c.kraw_ = kraw_;
  c.v_ = v_;
  c.positions_ = positions_;
  c.windows_ = windows_;
  c.cos_ = cos_;
  c.sin_ = sin_;
  return c;
}

void KvCache::Reserve(size_t entries) {
  positions_.reserve(entries);
  for (size_t l = 0; l < k_.size(); ++l) {
    k_[l].reserve(entries * kv_width_);
    kraw_[l].reserve(entries * kv_width_);
    v_[l].reserve(entries * kv_width_);
  }
}

size_t KvCache::Append(size_t n, int64_t first_pos) {
  assert(positions_.empty() || first_pos > positions_.back());
  const size_t start = positions_.size();
  for (size_t i = 0; i < n; ++i) positions_.push_back(first_pos + static_cast<int64_t>(i));
  const size_t new_len = positions_.size() * kv_width_;
  for (size_t l = 0; l < k_.size(); ++l) {
    k_[l].resize(new_len, 0.0f);
    kraw_[l].resize(new_len, 0.0f);
    v_[l].resize(new_len, 0.0f);
  }
  return start;
}

float* KvCache::k_row(int layer, size_t e) { return k_[Index(layer)].data() + e * kv_width_; }
float* KvCache::kraw_row(int layer, size_t e) { return kraw_[Index(layer)].data() + e * kv_width_; }
float* KvCache::v_row(int layer, size_t e) { return v_[Index(layer)].data() + e * kv_width_; }
const float* KvCache::k_data(int layer) const { return k_[Index(layer)].data(); }
const float* KvCache::v_data(int layer) const { return v_[Index(layer)].data(); }
const float* KvCache::kraw_data(int layer) const { return kraw_[Index(layer)].data(); }

// K = RoPE(Kraw, positions[e]) in one rotation (§7.3-7.4), never by
// rotating the old K by the position delta: composed rotations round
// differently and would not equal a run that never saw the evicted span.
void KvCache::Rerotate(size_t e) {
  ops::RopeAngles(inv_freq_, positions_[e], cos_, sin_);
  for (size_t l = 0; l < k_.size(); ++l) {
    std::span<const float> raw(kraw_[l].data() + e * kv_width_, kv_width_);
    std::span<float> out(k_[l].data() + e * kv_width_, kv_width_);
    ops::RotateHalfFrom(raw, out, head_dim_, cos_, sin_);
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
  auto splice = [&](std::vector<float>& rows) {
    rows.erase(rows.begin() + static_cast<ptrdiff_t>(from * kv_width_),
               rows.begin() + static_cast<ptrdiff_t>((from + count) * kv_width_));
  };
  for (size_t l = 0; l < k_.size(); ++l) {
    splice(k_[l]);
    splice(kraw_[l]);
    splice(v_[l]);
  }
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
  auto same = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() &&
           (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  };
  if (lo_ != o.lo_ || hi_ != o.hi_ || positions_ != o.positions_ || windows_ != o.windows_) {
    return false;
  }
  for (size_t l = 0; l < k_.size(); ++l) {
    if (!same(k_[l], o.k_[l]) || !same(kraw_[l], o.kraw_[l]) || !same(v_[l], o.v_[l])) return false;
  }
  return true;
}

}  // namespace lockstep
