// A compiled ICU regular expression used to split text the way the HF
// tokenizers crate splits with Oniguruma: non-overlapping leftmost matches,
// scanning left to right, lookahead limited to the text being split.
// Immutable after construction and thread-safe; a matcher from NewMatcher()
// belongs to one thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <unicode/regex.h>
#include <unicode/unistr.h>

#include "base/status.h"

namespace lockstep {

// One slice of a split text, in UTF-16 code units.
struct SplitSpan {
  int32_t begin;
  int32_t end;
  bool is_match;
};

class RegexSplitter {
 public:
  // `pattern` is UTF-8. Oniguruma's Unicode \s (U+0009-000D, U+0085, Z*)
  // is the same set as ICU's \s, so patterns are used verbatim.
  static Result<RegexSplitter> Compile(const std::string& pattern);

  std::unique_ptr<icu::RegexMatcher> NewMatcher() const;

  // Appends ordered, contiguous spans covering [begin, end) of the text
  // `matcher` was last reset to (empty matches are dropped). The regex sees
  // only that range: lookahead stops at `end`, as when the crate matches a
  // split on its own.
  static void Find(icu::RegexMatcher& matcher, int32_t begin, int32_t end,
                   std::vector<SplitSpan>* spans);

 private:
  explicit RegexSplitter(std::shared_ptr<const icu::RegexPattern> p)
      : pattern_(std::move(p)) {}
  std::shared_ptr<const icu::RegexPattern> pattern_;
};

}  // namespace lockstep
