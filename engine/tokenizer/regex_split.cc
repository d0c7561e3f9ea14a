#include "engine/tokenizer/regex_split.h"

#include <cassert>

namespace lockstep {

Result<RegexSplitter> RegexSplitter::Compile(const std::string& pattern) {
  UErrorCode status = U_ZERO_ERROR;
  UParseError parse_error;
  std::unique_ptr<icu::RegexPattern> p(icu::RegexPattern::compile(
      icu::UnicodeString::fromUTF8(pattern), 0, parse_error, status));
  if (U_FAILURE(status) || p == nullptr) {
    return InvalidError("regex \"" + pattern + "\" does not compile (" +
                        u_errorName(status) + " at offset " +
                        std::to_string(parse_error.offset) + ")");
  }
  return RegexSplitter(std::shared_ptr<const icu::RegexPattern>(std::move(p)));
}

std::unique_ptr<icu::RegexMatcher> RegexSplitter::NewMatcher() const {
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(pattern_->matcher(status));
  assert(U_SUCCESS(status) && m != nullptr);  // only fails on allocation
  return m;
}

void RegexSplitter::Find(icu::RegexMatcher& m, int32_t begin, int32_t end,
                         std::vector<SplitSpan>* spans) {
  if (begin >= end) return;
  UErrorCode status = U_ZERO_ERROR;
  m.region(begin, end, status);  // opaque, anchoring bounds (ICU defaults)
  int32_t prev = begin;
  while (U_SUCCESS(status) && m.find(status)) {
    const int32_t b = m.start(status);
    const int32_t e = m.end(status);
    if (U_FAILURE(status) || b == e) continue;
    if (prev != b) spans->push_back({prev, b, false});
    spans->push_back({b, e, true});
    prev = e;
  }
  if (prev != end) spans->push_back({prev, end, false});
}

}  // namespace lockstep
