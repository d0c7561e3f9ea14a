#include "engine/tokenizer/added_tokens.h"

#include <algorithm>

#include <unicode/uchar.h>
#include <unicode/utf8.h>

namespace lockstep {
namespace {

// Rust regex's Unicode \w.
bool IsWordChar(UChar32 c) {
  return u_hasBinaryProperty(c, UCHAR_ALPHABETIC) ||
         (U_GET_GC_MASK(c) & (U_GC_M_MASK | U_GC_ND_MASK | U_GC_PC_MASK)) != 0 ||
         u_hasBinaryProperty(c, UCHAR_JOIN_CONTROL);
}

// Rust regex's Unicode \s.
bool IsSpaceChar(UChar32 c) { return u_hasBinaryProperty(c, UCHAR_WHITE_SPACE); }

UChar32 LastChar(std::string_view s, size_t* start) {
  int32_t i = static_cast<int32_t>(s.size());
  UChar32 c;
  U8_PREV(reinterpret_cast<const uint8_t*>(s.data()), 0, i, c);
  *start = static_cast<size_t>(i);
  return c;
}

UChar32 FirstChar(std::string_view s, size_t* len) {
  int32_t i = 0;
  UChar32 c;
  U8_NEXT(reinterpret_cast<const uint8_t*>(s.data()), i, static_cast<int32_t>(s.size()), c);
  *len = static_cast<size_t>(i);
  return c;
}

bool EndsWithWord(std::string_view s) {
  size_t at;
  return !s.empty() && IsWordChar(LastChar(s, &at));
}

bool StartsWithWord(std::string_view s) {
  size_t len;
  return !s.empty() && IsWordChar(FirstChar(s, &len));
}

// Start of the whitespace run that ends `s`.
size_t TrailingSpaceStart(std::string_view s) {
  size_t at = s.size();
  while (at > 0) {
    size_t prev;
    if (!IsSpaceChar(LastChar(s.substr(0, at), &prev))) break;
    at = prev;
  }
  return at;
}

// Length of the whitespace run that starts `s`.
size_t LeadingSpaceLength(std::string_view s) {
  size_t at = 0;
  while (at < s.size()) {
    size_t len;
    if (!IsSpaceChar(FirstChar(s.substr(at), &len))) break;
    at += len;
  }
  return at;
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens,
                                 const std::function<std::string(std::string_view)>& normalize)
    : tokens_(std::move(tokens)) {
  raw_.by_first_byte.resize(256);
  normalized_.by_first_byte.resize(256);
  for (uint32_t i = 0; i < tokens_.size(); ++i) {
    index_by_id_.emplace(tokens_[i].id, i);
    const bool norm = tokens_[i].normalized;
    patterns_.push_back(norm && normalize ? normalize(tokens_[i].content) : tokens_[i].content);
    if (patterns_.back().empty()) continue;  // nothing left to match
    MatchSet& set = norm ? normalized_ : raw_;
    set.by_first_byte[static_cast<uint8_t>(patterns_.back()[0])].push_back(i);
    set.empty = false;
  }
}

const AddedToken* AddedVocabulary::FindById(uint32_t id) const {
  auto it = index_by_id_.find(id);
  return it == index_by_id_.end() ? nullptr : &tokens_[it->second];
}

const AddedToken* AddedVocabulary::LongestAt(const MatchSet& set, std::string_view text,
                                             size_t pos) const {
  const AddedToken* best = nullptr;
  size_t best_len = 0;
  for (uint32_t i : set.by_first_byte[static_cast<uint8_t>(text[pos])]) {
    const std::string& p = patterns_[i];
    if (p.size() > best_len && text.compare(pos, p.size(), p) == 0) {
      best = &tokens_[i];
      best_len = p.size();
    }
  }
  return best;
}

void AddedVocabulary::SplitWith(const MatchSet& set, std::string_view text,
                                std::vector<TextSegment>* out) const {
  size_t emitted = 0;  // end of the last emitted segment
  size_t pos = 0;      // where the next match search starts
  while (pos < text.size()) {
    const AddedToken* t = LongestAt(set, text, pos);
    if (t == nullptr) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + patterns_[t - tokens_.data()].size();
    pos = stop;  // leftmost-longest, non-overlapping
    if (t->single_word && ((start > 0 && EndsWithWord(text.substr(0, start))) ||
                           (stop < text.size() && StartsWithWord(text.substr(stop))))) {
      continue;
    }
    if (t->lstrip) start = std::max(TrailingSpaceStart(text.substr(0, start)), emitted);
    if (t->rstrip) stop += LeadingSpaceLength(text.substr(stop));
    if (emitted < start) out->push_back({text.substr(emitted, start - emitted), std::nullopt});
    out->push_back({text.substr(start, stop - start), t->id});
    emitted = stop;
  }
  if (emitted < text.size()) out->push_back({text.substr(emitted), std::nullopt});
}

void AddedVocabulary::SplitPass(Pass pass, std::string_view text,
                                std::vector<TextSegment>* out) const {
  const MatchSet& set = pass == Pass::kRaw ? raw_ : normalized_;
  if (set.empty) {
    if (!text.empty()) out->push_back({text, std::nullopt});
    return;
  }
  SplitWith(set, text, out);
}

std::vector<TextSegment> AddedVocabulary::Split(std::string_view text) const {
  std::vector<TextSegment> first, out;
  SplitPass(Pass::kRaw, text, &first);
  for (const TextSegment& seg : first) {
    if (seg.token_id) {
      out.push_back(seg);
    } else {
      SplitPass(Pass::kNormalized, seg.text, &out);
    }
  }
  return out;
}

}  // namespace lockstep
