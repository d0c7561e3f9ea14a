// Tokenizer: a HuggingFace tokenizer.json (byte-level BPE family) loaded
// into an immutable object that encodes text to ids and decodes ids back,
// reproducing the `tokenizers` crate v0.23.1 with add_special_tokens=false
// (CIS-2 §3.1).
//
// Supported configuration (anything else is refused on load with
// Unimplemented rather than tokenized differently):
//   normalizer: null, NFC, NFD, NFKC, NFKD or a Sequence of those (ICU).
//   pre_tokenizer: Digits, Split, ByteLevel, or a Sequence of those ending
//     with exactly one ByteLevel.
//   model: BPE (dropout null/0, byte_fallback false, no
//     continuing_subword_prefix/end_of_word_suffix; unk_token, fuse_unk and
//     ignore_merges supported).
//   post_processor: null or ByteLevel.  decoder: ByteLevel.
//   truncation, padding: null.
//
// Input policy: Encode accepts any bytes. Invalid UTF-8 is first replaced,
// each maximal invalid subpart by one U+FFFD, exactly like Rust's
// String::from_utf8_lossy (so the ids equal the crate's for that lossy
// string); NUL is an ordinary character. Byte symbols missing from the
// vocab are dropped when the model has no unk_token, as in the crate.
//
// Decode: ids -> token strings (added tokens -> their content, special ones
// included) -> inverse byte map -> bytes -> lossy UTF-8 (invalid sequences
// become U+FFFD). Ids that are neither in the vocab nor added tokens are
// skipped, as the crate does.
//
// Thread-safety: all const methods may run concurrently. Copies are cheap
// and share the immutable tables. A moved-from Tokenizer may only be
// assigned to or destroyed.
//
// Unicode tables come from ICU; the crate uses Oniguruma's and Rust's. They
// agree except possibly on code points assigned in the newest Unicode
// version that only one of them knows.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lockstep {

struct TokenizerDoc;  // tokenizer_json.h

class Tokenizer {
 public:
  // Reads and validates `path`. Errors name the file and the field.
  static Result<Tokenizer> FromFile(const std::string& path);
  // `source_name` is used in error messages in place of a path.
  static Result<Tokenizer> FromJson(std::string_view json, const std::string& source_name);
  // From a parsed (or built: bpe_vocabulary.h) document.
  static Result<Tokenizer> FromDoc(TokenizerDoc doc, const std::string& source_name);

  // Raw BPE encode (no BOS/EOS); added/special token strings found in
  // `text` become their single ids. REQUIRES: text.size() < 2^30.
  std::vector<uint32_t> Encode(std::string_view text) const;

  // Always valid UTF-8.
  std::string Decode(std::span<const uint32_t> ids) const;

  // Max id + 1 across the vocab and the added tokens.
  uint32_t vocab_size() const;

  // Id of a vocab entry or added token (byte-level form, e.g. "Ġthe").
  std::optional<uint32_t> TokenToId(std::string_view token) const;

  // The content of the first special added token (e.g. "<|im_start|>")
  // that Encode(text) emits, or nullopt when it emits none: what lets
  // untrusted text be refused before it could act as markup.
  std::optional<std::string> FirstSpecialToken(std::string_view text) const;

  struct Impl;  // opaque; defined in tokenizer.cc

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;  // never null
};

}  // namespace lockstep
