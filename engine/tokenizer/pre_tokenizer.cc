#include "engine/tokenizer/pre_tokenizer.h"

#include <algorithm>

#include <unicode/uchar.h>
#include <unicode/utf16.h>

#include "engine/tokenizer/regex_split.h"

namespace lockstep {
namespace {

using json = nlohmann::json;

// GPT-2's pattern, verbatim from the crate's byte_level.rs (CIS-2 §3.1.4.b).
constexpr char kGpt2Pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|"
    "\\s+(?!\\S)|\\s+";

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

// Turns matched/unmatched spans into kept ranges, like the crate's
// NormalizedString::split for each SplitDelimiterBehavior; appends the
// non-empty ones to `out`.
void ApplyBehavior(const std::vector<SplitSpan>& spans, Behavior b,
                   std::vector<PieceRange>* out) {
  const size_t first = out->size();
  bool prev_match = false;
  if (b == Behavior::kMergedWithNext) {
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (out->size() > first && it->is_match && !prev_match) {
        out->back().begin = it->begin;
      } else {
        out->push_back({it->begin, it->end});
      }
      prev_match = it->is_match;
    }
    std::reverse(out->begin() + static_cast<ptrdiff_t>(first), out->end());
    return;
  }
  for (const SplitSpan& s : spans) {
    const bool merge =
        out->size() > first &&
        ((b == Behavior::kContiguous && s.is_match == prev_match) ||
         (b == Behavior::kMergedWithPrevious && s.is_match && !prev_match));
    if (b == Behavior::kRemoved && s.is_match) {
      // dropped
    } else if (merge) {
      out->back().end = s.end;
    } else {
      out->push_back({s.begin, s.end});
    }
    prev_match = s.is_match;
  }
}

// Rust char::is_numeric: general category Nd, Nl or No.
bool IsNumeric(UChar32 c) { return (U_GET_GC_MASK(c) & U_GC_N_MASK) != 0; }

class DigitsStep : public PreTokenizer {
 public:
  explicit DigitsStep(bool individual) : individual_(individual) {}
  void Split(Pieces* pieces) const override {
    std::vector<PieceRange> out;
    out.reserve(pieces->ranges.size());
    std::vector<SplitSpan> spans;
    const icu::UnicodeString& t = pieces->text;
    for (const PieceRange& r : pieces->ranges) {
      spans.clear();
      int32_t run = r.begin;
      for (int32_t i = r.begin; i < r.end;) {
        const UChar32 c = t.char32At(i);
        const int32_t next = i + U16_LENGTH(c);
        if (IsNumeric(c)) {
          if (run < i) spans.push_back({run, i, false});
          spans.push_back({i, next, true});
          run = next;
        }
        i = next;
      }
      if (run < r.end) spans.push_back({run, r.end, false});
      ApplyBehavior(spans, individual_ ? Behavior::kIsolated : Behavior::kContiguous, &out);
    }
    pieces->ranges = std::move(out);
  }

 private:
  bool individual_;
};

class RegexStep : public PreTokenizer {
 public:
  RegexStep(RegexSplitter re, Behavior behavior, bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  void Split(Pieces* pieces) const override {
    std::vector<PieceRange> out;
    out.reserve(pieces->ranges.size() + static_cast<size_t>(pieces->text.length()) / 4);
    std::vector<SplitSpan> spans;
    std::unique_ptr<icu::RegexMatcher> m = re_.NewMatcher();
    m->reset(pieces->text);
    for (const PieceRange& r : pieces->ranges) {
      spans.clear();
      RegexSplitter::Find(*m, r.begin, r.end, &spans);
      if (invert_) {
        for (SplitSpan& s : spans) s.is_match = !s.is_match;
      }
      ApplyBehavior(spans, behavior_, &out);
    }
    pieces->ranges = std::move(out);
  }

 private:
  RegexSplitter re_;
  Behavior behavior_;
  bool invert_;
};

// ByteLevel's splitting half: optional prefix space, optional GPT-2 split.
class ByteLevelStep : public PreTokenizer {
 public:
  ByteLevelStep(bool add_prefix_space, std::unique_ptr<RegexStep> regex)
      : add_prefix_space_(add_prefix_space), regex_(std::move(regex)) {}
  void Split(Pieces* pieces) const override {
    if (add_prefix_space_) PrependSpaces(pieces);
    if (regex_) regex_->Split(pieces);
  }

 private:
  // Rebuilds the text with a space before every piece not starting with one.
  static void PrependSpaces(Pieces* pieces) {
    icu::UnicodeString text;
    std::vector<PieceRange> ranges;
    ranges.reserve(pieces->ranges.size());
    for (const PieceRange& r : pieces->ranges) {
      const int32_t begin = text.length();
      if (pieces->text.charAt(r.begin) != u' ') text.append(u' ');
      text.append(pieces->text, r.begin, r.end - r.begin);
      ranges.push_back({begin, text.length()});
    }
    pieces->text = std::move(text);
    pieces->ranges = std::move(ranges);
  }

  bool add_prefix_space_;
  std::unique_ptr<RegexStep> regex_;
};

Status Err(const std::string& where, const std::string& msg, bool unimplemented = false) {
  return Status(unimplemented ? ErrorKind::kUnimplemented : ErrorKind::kInvalid,
                where + ": " + msg);
}

Result<bool> GetBool(const json& j, const char* key, bool dflt, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return dflt;
  if (!it->is_boolean()) return Err(where + "." + key, "must be true or false");
  return it->get<bool>();
}

Result<Behavior> ParseBehavior(const json& j, const std::string& where) {
  auto it = j.find("behavior");
  if (it == j.end() || !it->is_string()) return Err(where + ".behavior", "missing or not a string");
  const std::string s = it->get<std::string>();
  if (s == "Removed") return Behavior::kRemoved;
  if (s == "Isolated") return Behavior::kIsolated;
  if (s == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (s == "MergedWithNext") return Behavior::kMergedWithNext;
  if (s == "Contiguous") return Behavior::kContiguous;
  return Err(where + ".behavior", "unknown behavior \"" + s + "\"");
}

// True if `pattern` uses an escape whose meaning differs between the
// crate's Oniguruma (Ruby syntax) and ICU.
bool UsesOnigurumaOnlyEscape(const std::string& pattern) {
  for (size_t i = 0; i + 1 < pattern.size(); ++i) {
    if (pattern[i] != '\\') continue;
    if (pattern[i + 1] == 'h' || pattern[i + 1] == 'H') return true;
    ++i;  // skip the escaped character
  }
  return false;
}

Result<std::shared_ptr<const PreTokenizer>> ParseSplit(const json& j, const std::string& where) {
  auto pat = j.find("pattern");
  if (pat == j.end() || !pat->is_object() || pat->size() != 1) {
    return Err(where + ".pattern", "must be {\"Regex\": ...} or {\"String\": ...}");
  }
  const bool is_regex = pat->contains("Regex");
  const json& text = is_regex ? (*pat)["Regex"] : pat->value("String", json());
  if (!text.is_string()) return Err(where + ".pattern", "must hold a string");
  std::string pattern = text.get<std::string>();
  if (!is_regex) {
    // A literal: quote it for ICU (\Q..\E cannot contain "\E").
    std::string quoted;
    for (char c : pattern) {
      if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) quoted += '\\';
      quoted += c;
    }
    pattern = quoted.empty() ? "(?!)" : quoted;  // empty literal: no match
  }
  if (is_regex && UsesOnigurumaOnlyEscape(pattern)) {
    return Err(where + ".pattern", "\\h and \\H are not supported (hex digit in Oniguruma, space in ICU)", true);
  }
  LOCKSTEP_ASSIGN_OR_RETURN(Behavior behavior, ParseBehavior(j, where));
  LOCKSTEP_ASSIGN_OR_RETURN(bool invert, GetBool(j, "invert", false, where));
  Result<RegexSplitter> re = RegexSplitter::Compile(pattern);
  if (!re.ok()) return re.status().WithContext(where + ".pattern");
  return std::shared_ptr<const PreTokenizer>(
      std::make_shared<RegexStep>(std::move(re).value(), behavior, invert));
}

Result<std::shared_ptr<const PreTokenizer>> ParseByteLevel(const json& j,
                                                          const std::string& where) {
  LOCKSTEP_ASSIGN_OR_RETURN(bool prefix, GetBool(j, "add_prefix_space", true, where));
  LOCKSTEP_ASSIGN_OR_RETURN(bool use_regex, GetBool(j, "use_regex", true, where));
  LOCKSTEP_ASSIGN_OR_RETURN(bool trim, GetBool(j, "trim_offsets", true, where));
  (void)trim;  // offsets only; ids are unaffected
  std::unique_ptr<RegexStep> regex;
  if (use_regex) {
    LOCKSTEP_ASSIGN_OR_RETURN(RegexSplitter re, RegexSplitter::Compile(kGpt2Pattern));
    regex = std::make_unique<RegexStep>(std::move(re), Behavior::kIsolated, false);
  }
  return std::shared_ptr<const PreTokenizer>(
      std::make_shared<ByteLevelStep>(prefix, std::move(regex)));
}

// Appends the steps of `j` (flattening Sequences) to `steps`.
Status ParseInto(const json& j, const std::string& where, bool* saw_byte_level,
                 std::vector<std::shared_ptr<const PreTokenizer>>* steps) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return Err(where, "must be an object with a string \"type\"");
  }
  if (*saw_byte_level) {
    return Err(where, "steps after ByteLevel are not supported", true);
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    auto list = j.find("pretokenizers");
    if (list == j.end() || !list->is_array()) return Err(where + ".pretokenizers", "must be an array");
    for (size_t i = 0; i < list->size(); ++i) {
      LOCKSTEP_RETURN_IF_ERROR(ParseInto((*list)[i], where + ".pretokenizers[" +
                                         std::to_string(i) + "]", saw_byte_level, steps));
    }
    return Status::Ok();
  }
  if (type == "Digits") {
    LOCKSTEP_ASSIGN_OR_RETURN(bool individual, GetBool(j, "individual_digits", false, where));
    steps->push_back(std::make_shared<DigitsStep>(individual));
    return Status::Ok();
  }
  if (type == "Split") {
    LOCKSTEP_ASSIGN_OR_RETURN(auto step, ParseSplit(j, where));
    steps->push_back(std::move(step));
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    LOCKSTEP_ASSIGN_OR_RETURN(auto step, ParseByteLevel(j, where));
    steps->push_back(std::move(step));
    *saw_byte_level = true;
    return Status::Ok();
  }
  return Err(where + ".type", "pre-tokenizer \"" + type + "\" is not supported", true);
}

}  // namespace

Result<PreTokenizerChain> PreTokenizerChain::Parse(const nlohmann::json& config,
                                                   const std::string& source) {
  const std::string where = source + ": pre_tokenizer";
  if (config.is_null()) {
    return Err(where, "a null pre_tokenizer (no ByteLevel step) is not supported", true);
  }
  PreTokenizerChain chain;
  bool saw_byte_level = false;
  LOCKSTEP_RETURN_IF_ERROR(ParseInto(config, where, &saw_byte_level, &chain.steps_));
  if (!saw_byte_level) {
    return Err(where, "chains without a final ByteLevel step are not supported", true);
  }
  return chain;
}

Pieces PreTokenizerChain::Run(icu::UnicodeString text) const {
  Pieces pieces;
  pieces.text = std::move(text);
  if (!pieces.text.isEmpty()) pieces.ranges.push_back({0, pieces.text.length()});
  for (const auto& step : steps_) step->Split(&pieces);
  return pieces;
}

}  // namespace lockstep
