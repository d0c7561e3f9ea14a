// Open-addressing hash tables for the BPE model's two hot lookups: token
// text -> id and (left id, right id) -> merge. Flat arrays keep loading the
// 49k-entry vocab and the encode loop cache-friendly.
// Immutable after building; concurrent const lookups are thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep {

// Maps token text to id. The texts live in a caller-owned id -> token
// vector, passed to every call. REQUIRES: that vector's entries for
// inserted ids do not change afterwards.
class TokenIndex {
 public:
  void Reserve(size_t count);
  // False (and no change) if `token` is already present.
  bool Insert(std::string_view token, uint32_t id, const std::vector<std::string>& tokens);
  std::optional<uint32_t> Find(std::string_view token, const std::vector<std::string>& tokens) const;

 private:
  struct Slot {
    uint64_t hash = 0;
    uint32_t id = 0;
    bool used = false;
  };
  static uint64_t Hash(std::string_view s);
  std::vector<Slot> slots_;  // size is a power of two, at most half full
  size_t size_ = 0;
};

struct MergeInfo {
  uint32_t rank;
  uint32_t new_id;
};

// Maps an adjacent id pair to its merge. Ids must be < 2^31.
class MergeTable {
 public:
  void Reserve(size_t count);
  // Inserts or overwrites (a repeated pair keeps its last rank).
  void Set(uint32_t left, uint32_t right, MergeInfo info);
  const MergeInfo* Find(uint32_t left, uint32_t right) const {
    if (slots_.empty()) return nullptr;
    const uint64_t key = Key(left, right);
    for (size_t i = Bucket(key);; i = (i + 1) & (slots_.size() - 1)) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.info;
      if (s.key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~0ull;
  struct Slot {
    uint64_t key = kEmpty;
    MergeInfo info{};
  };
  static uint64_t Key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }
  size_t Bucket(uint64_t key) const {
    return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void Grow();
  std::vector<Slot> slots_;  // power-of-two size, at most half full
  size_t size_ = 0;
  int shift_ = 64;
};

}  // namespace lockstep
