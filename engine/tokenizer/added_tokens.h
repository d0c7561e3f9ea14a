// Added (and special) tokens: strings from tokenizer.json's "added_tokens"
// that are cut out of the input before pre-tokenization and emitted as one
// id each, even with add_special_tokens=false (as the HF crate does).
// Matching is leftmost-longest over the raw text, honouring single_word,
// lstrip and rstrip. Immutable after construction; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace lockstep {

struct AddedToken {
  std::string content;  // non-empty
  uint32_t id = 0;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// One piece of the input: either plain text for the pre-tokenizer, or an
// added token's id (text is then the matched span, including stripped
// whitespace).
struct TextSegment {
  std::string_view text;
  std::optional<uint32_t> token_id;
};

class AddedVocabulary {
 public:
  // Matching happens in two passes, as in the crate: normalized=false
  // tokens on the raw input, then (after the normalizer runs on what is
  // left) normalized=true tokens, matched by their normalized content.
  enum class Pass { kRaw, kNormalized };

  AddedVocabulary() = default;
  // REQUIRES: contents non-empty and unique. `normalize` maps a
  // normalized=true token's content to the text it is matched as.
  explicit AddedVocabulary(
      std::vector<AddedToken> tokens,
      const std::function<std::string(std::string_view)>& normalize = nullptr);

  // Appends ordered segments covering `text` to `out`, cutting out the
  // tokens of one pass. REQUIRES: valid UTF-8. Views point into `text`.
  void SplitPass(Pass pass, std::string_view text, std::vector<TextSegment>* out) const;

  // Both passes with an identity normalizer.
  std::vector<TextSegment> Split(std::string_view text) const;

  const AddedToken* FindById(uint32_t id) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Tokens matched in one pass, bucketed by first byte of their pattern.
  struct MatchSet {
    std::vector<std::vector<uint32_t>> by_first_byte;  // [256] -> token index
    bool empty = true;
  };
  const AddedToken* LongestAt(const MatchSet& set, std::string_view text,
                              size_t pos) const;
  void SplitWith(const MatchSet& set, std::string_view text,
                 std::vector<TextSegment>* out) const;

  std::vector<AddedToken> tokens_;
  std::vector<std::string> patterns_;  // [tokens_]: the text each matches
  std::unordered_map<uint32_t, size_t> index_by_id_;  // id -> tokens_ index
  MatchSet raw_;         // normalized=false: matched on the raw input first
  MatchSet normalized_;  // normalized=true: matched in what is left
};

}  // namespace lockstep
