// Pre-tokenizers: split normalized text into the "words" the BPE model sees
// (CIS-2 §3.1.4), reproducing the HF tokenizers crate components Digits,
// Split and ByteLevel. A Sequence is flattened into PreTokenizerChain.
// Components are immutable after parsing; Split() is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <unicode/unistr.h>

#include "base/status.h"

namespace lockstep {

// Text pieces flowing through the chain: ordered, non-empty UTF-16 ranges
// of one backing string.
struct PieceRange {
  int32_t begin;
  int32_t end;
};
struct Pieces {
  icu::UnicodeString text;
  std::vector<PieceRange> ranges;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces every piece by its sub-pieces, in order; drops empty ones.
  // May replace pieces->text (re-pointing the ranges).
  virtual void Split(Pieces* pieces) const = 0;
};

// The whole configured chain. The last step is always ByteLevel (its byte
// remapping is applied later, by the BPE model, on UTF-8 bytes).
class PreTokenizerChain {
 public:
  // Parses tokenizer.json's "pre_tokenizer". Components or options this
  // build does not implement give Unimplemented; bad fields give Invalid.
  // `source` names the file in error messages.
  static Result<PreTokenizerChain> Parse(const nlohmann::json& config,
                                         const std::string& source);

  // Splits `text` (one non-added-token segment) into words.
  Pieces Run(icu::UnicodeString text) const;

 private:
  std::vector<std::shared_ptr<const PreTokenizer>> steps_;
};

}  // namespace lockstep
