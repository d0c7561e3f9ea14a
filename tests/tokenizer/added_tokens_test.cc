// AddedVocabulary splitting; the cases are the HF crate's own unit tests
// (added_vocabulary.rs), minus its Lowercase normalizer.
#include "engine/tokenizer/added_tokens.h"

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace lockstep {
namespace {

using Splits = std::vector<std::pair<std::string, int>>;  // -1: plain text

Splits Simplify(const AddedVocabulary& v, std::string_view text) {
  Splits out;
  for (const TextSegment& s : v.Split(text)) {
    out.emplace_back(std::string(s.text), s.token_id ? static_cast<int>(*s.token_id) : -1);
  }
  return out;
}

AddedToken Tok(std::string content, uint32_t id) {
  AddedToken t;
  t.content = std::move(content);
  t.id = id;
  return t;
}

TEST(AddedTokens, ExtractsNormalAndSpecialTokens) {
  AddedVocabulary v({Tok("my", 0), Tok("name", 1), Tok("[CLS]", 2), Tok("[SEP]", 3)});
  EXPECT_EQ(Simplify(v, "[CLS] My name is Anthony [SEP]"),
            (Splits{{"[CLS]", 2}, {" My ", -1}, {"name", 1}, {" is Anthony ", -1}, {"[SEP]", 3}}));
  EXPECT_EQ(Simplify(v, ""), Splits{});
  EXPECT_EQ(Simplify(v, "plain"), (Splits{{"plain", -1}}));
}

TEST(AddedTokens, LeftmostLongest) {
  AddedVocabulary v({Tok("<a>", 0), Tok("<a><b>", 1), Tok("b>", 2)});
  EXPECT_EQ(Simplify(v, "x<a><b>y<a>b>"),
            (Splits{{"x", -1}, {"<a><b>", 1}, {"y", -1}, {"<a>", 0}, {"b>", 2}}));
}

TEST(AddedTokens, SingleWord) {
  AddedToken mask = Tok("<mask>", 0);
  mask.single_word = true;
  AddedVocabulary v({mask});
  EXPECT_EQ(Simplify(v, "<mask> My name <mask> A<mask> <mask>ony <mask>"),
            (Splits{{"<mask>", 0}, {" My name ", -1}, {"<mask>", 0},
                    {" A<mask> <mask>ony ", -1}, {"<mask>", 0}}));
  // Punctuation is not a word character; a combining mark is.
  EXPECT_EQ(Simplify(v, "<mask>, <mask>- \xE2\x97\x8C\xCC\xB0<mask>"),
            (Splits{{"<mask>", 0}, {", ", -1}, {"<mask>", 0}, {"- \xE2\x97\x8C\xCC\xB0<mask>", -1}}));
}

TEST(AddedTokens, LstripRstripUnicodeSpace) {
  AddedToken mask = Tok("<mask>", 0);
  mask.single_word = mask.lstrip = mask.rstrip = true;
  AddedVocabulary v({mask});
  EXPECT_EQ(Simplify(v, "Hi <mask> there\t<mask>\t<mask>\xE2\x80\x80"),
            (Splits{{"Hi", -1}, {" <mask> ", 0}, {"there", -1}, {"\t<mask>\t", 0},
                    {"<mask>\xE2\x80\x80", 0}}));
}

TEST(AddedTokens, NormalizedTokensMatchAfterRawOnes) {
  // Raw tokens are cut first; normalized ones only in what is left.
  AddedToken ab = Tok("ab", 0);
  ab.normalized = true;
  AddedVocabulary v({ab, Tok("b", 1)});
  EXPECT_EQ(Simplify(v, "ab"), (Splits{{"a", -1}, {"b", 1}}));
  EXPECT_EQ(Simplify(v, "xab"), (Splits{{"xa", -1}, {"b", 1}}));
  AddedVocabulary w({ab});
  EXPECT_EQ(Simplify(w, "xaby"), (Splits{{"x", -1}, {"ab", 0}, {"y", -1}}));
}

}  // namespace
}  // namespace lockstep
