#include "engine/tokenizer/flat_tables.h"

#include <bit>
#include <cassert>

namespace lockstep {
namespace {

size_t CapacityFor(size_t count) { return std::bit_ceil(std::max<size_t>(16, count * 2)); }

}  // namespace

uint64_t TokenIndex::Hash(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;  // FNV-1a, then a final mix
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h ^ (h >> 29);
}

void TokenIndex::Reserve(size_t count) {
  assert(size_ == 0);
  slots_.assign(CapacityFor(count), Slot{});
}

bool TokenIndex::Insert(std::string_view token, uint32_t id,
                        const std::vector<std::string>& tokens) {
  if ((size_ + 1) * 2 > slots_.size()) {
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(CapacityFor(size_ + 1), Slot{});
    size_ = 0;
    for (const Slot& s : old) {
      if (s.used) Insert(tokens[s.id], s.id, tokens);
    }
  }
  const uint64_t h = Hash(token);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Slot& s = slots_[i];
    if (!s.used) {
      s = {h, id, true};
      ++size_;
      return true;
    }
    if (s.hash == h && tokens[s.id] == token) return false;
  }
}

std::optional<uint32_t> TokenIndex::Find(std::string_view token,
                                         const std::vector<std::string>& tokens) const {
  if (slots_.empty()) return std::nullopt;
  const uint64_t h = Hash(token);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (!s.used) return std::nullopt;
    if (s.hash == h && tokens[s.id] == token) return s.id;
  }
}

void MergeTable::Reserve(size_t count) {
  assert(size_ == 0);
  slots_.assign(CapacityFor(count), Slot{});
  shift_ = 64 - std::countr_zero(slots_.size());
}

void MergeTable::Grow() {
  std::vector<Slot> old = std::move(slots_);
  const size_t wanted = size_ + 1;
  size_ = 0;
  Reserve(wanted);
  for (const Slot& s : old) {
    if (s.key != kEmpty) Set(static_cast<uint32_t>(s.key >> 32), static_cast<uint32_t>(s.key), s.info);
  }
}

void MergeTable::Set(uint32_t left, uint32_t right, MergeInfo info) {
  if ((size_ + 1) * 2 > slots_.size()) Grow();
  const uint64_t key = Key(left, right);
  for (size_t i = Bucket(key);; i = (i + 1) & (slots_.size() - 1)) {
    Slot& s = slots_[i];
    if (s.key == key) {
      s.info = info;
      return;
    }
    if (s.key == kEmpty) {
      s = {key, info};
      ++size_;
      return;
    }
  }
}

}  // namespace lockstep
