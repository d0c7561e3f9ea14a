#include "engine/tokenizer/regex_split.h"

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

std::vector<SplitSpan> RegexSplitter::Find(const icu::UnicodeString& text) const {
  std::vector<SplitSpan> spans;
  if (text.isEmpty()) return spans;
  UErrorCode status = U_ZERO_ERROR;
  std::unique_ptr<icu::RegexMatcher> m(pattern_->matcher(text, status));
  int32_t prev = 0;
  while (U_SUCCESS(status) && m->find(status)) {
    const int32_t b = m->start(status);
    const int32_t e = m->end(status);
    if (U_FAILURE(status) || b == e) continue;
    if (prev != b) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != text.length()) spans.push_back({prev, text.length(), false});
  return spans;
}

}  // namespace lockstep
