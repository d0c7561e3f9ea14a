// Unicode normalizers from tokenizer.json's "normalizer": null, NFC, NFD,
// NFKC, NFKD, or a Sequence of those, applied with ICU. Other normalizers
// are refused (Unimplemented). Immutable; Apply is thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <unicode/normalizer2.h>

#include "base/status.h"

namespace lockstep {

class TextNormalizer {
 public:
  // Identity.
  TextNormalizer() = default;
  // `source` names the file in error messages.
  static Result<TextNormalizer> Parse(const nlohmann::json& config, const std::string& source);

  bool is_identity() const { return steps_.empty(); }
  // REQUIRES: `text` is valid UTF-8.
  std::string Apply(std::string_view text) const;

 private:
  std::vector<const icu::Normalizer2*> steps_;  // ICU-owned singletons
};

}  // namespace lockstep
