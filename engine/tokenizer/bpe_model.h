// Byte-level BPE model (CIS-2 §3.1.5): vocab, ranked merges, and the
// priority-queue merge loop of the HF tokenizers crate (lowest rank first,
// leftmost position on ties, stale entries re-validated and skipped).
// Immutable after Build; EncodeWord is thread-safe (the word cache is owned
// by the caller).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/tokenizer/flat_tables.h"

namespace lockstep {

struct BpeOptions {
  std::optional<std::string> unk_token;  // must be in vocab when set
  bool fuse_unk = false;
  bool ignore_merges = false;
};

// Per-call memo of word -> ids; not shared between threads.
using WordCache = std::unordered_map<std::string, std::vector<uint32_t>>;

class BpeModel {
 public:
  BpeModel() = default;

  // `vocab`: (token, id) in file order; `merges`: (left, right) in rank
  // order. Errors (Invalid) name `where` and the offending entry.
  static Result<BpeModel> Build(std::vector<std::pair<std::string, uint32_t>> vocab,
                                const std::vector<std::pair<std::string, std::string>>& merges,
                                BpeOptions options, const std::string& where);

  // Appends the ids of one pre-tokenized word. `word` is the word's raw
  // UTF-8 bytes; each byte is looked up as its byte-level symbol (§3.1.5.b).
  // Bytes whose symbol is missing from the vocab become the unk token if one
  // is configured, and are dropped otherwise (as the crate does).
  void EncodeWord(std::string_view word, WordCache* cache,
                  std::vector<uint32_t>* out) const;

  std::optional<uint32_t> TokenToId(std::string_view token) const;
  // nullptr when `id` is not in the vocab.
  const std::string* IdToToken(uint32_t id) const;
  // Max id + 1 (0 for an empty vocab).
  uint32_t id_bound() const { return static_cast<uint32_t>(id_to_token_.size()); }
  size_t vocab_count() const { return vocab_count_; }

 private:
  const MergeInfo* FindMerge(uint32_t a, uint32_t b) const { return merges_.Find(a, b); }
  Status AddMerges(const std::vector<std::pair<std::string, std::string>>& merges,
                   const std::string& where);
  void MergeAll(std::vector<uint32_t>* ids) const;
  void InitialSymbols(std::string_view word, std::vector<uint32_t>* ids) const;

  TokenIndex token_to_id_;                // texts live in id_to_token_
  std::vector<std::string> id_to_token_;  // [id_bound]; empty at unused ids
  std::vector<bool> id_used_;             // [id_bound]
  size_t vocab_count_ = 0;
  MergeTable merges_;
  int64_t byte_to_id_[256] = {};          // -1 when the byte symbol is missing
  std::optional<uint32_t> unk_id_;
  BpeOptions options_;
};

}  // namespace lockstep
