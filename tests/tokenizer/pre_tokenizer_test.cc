// Pre-tokenizer splits; expectations are the HF crate's own unit-test cases
// (byte_level.rs, digits.rs, split.rs).
#include "engine/tokenizer/pre_tokenizer.h"

#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace lockstep {
namespace {

using json = nlohmann::json;
using Words = std::vector<std::string>;

const json kByteLevelNoSplit = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                                {"trim_offsets", true}, {"use_regex", false}};

Words SplitWords(const PreTokenizerChain& chain, const std::string& text) {
  Words out;
  const Pieces pieces = chain.Run(icu::UnicodeString::fromUTF8(text));
  for (const PieceRange& r : pieces.ranges) {
    std::string s;
    pieces.text.tempSubStringBetween(r.begin, r.end).toUTF8String(s);
    out.push_back(s);
  }
  return out;
}

Words PreTokenize(const json& config, const std::string& text) {
  auto chain = PreTokenizerChain::Parse(config, "test.json");
  EXPECT_TRUE(chain.ok()) << chain.status().ToString();
  return chain.ok() ? SplitWords(*chain, text) : Words{};
}

json ByteLevel(bool add_prefix_space) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space},
          {"trim_offsets", true}, {"use_regex", true}};
}

json Then(json first, json second = kByteLevelNoSplit) {
  return {{"type", "Sequence"}, {"pretokenizers", {std::move(first), std::move(second)}}};
}

TEST(PreTokenizer, ByteLevelGpt2Split) {
  EXPECT_EQ(PreTokenize(ByteLevel(false), "Hello my friend, how is your day going?"),
            (Words{"Hello", " my", " friend", ",", " how", " is", " your", " day", " going", "?"}));
  EXPECT_EQ(PreTokenize(ByteLevel(false), "Hello there\nHello there"),
            (Words{"Hello", " there", "\n", "Hello", " there"}));
  EXPECT_EQ(PreTokenize(ByteLevel(false), "Hello there       dear"),
            (Words{"Hello", " there", "      ", " dear"}));
  EXPECT_EQ(PreTokenize(ByteLevel(false), "i\xE2\xAD\xA2j"), (Words{"i", "\xE2\xAD\xA2", "j"}));
  EXPECT_TRUE(PreTokenize(ByteLevel(false), "").empty());
}

TEST(PreTokenizer, ByteLevelAddPrefixSpace) {
  for (const char* s : {" Hello my friend, how", "Hello my friend, how"}) {
    EXPECT_EQ(PreTokenize(ByteLevel(true), s), (Words{" Hello", " my", " friend", ",", " how"})) << s;
  }
}

TEST(PreTokenizer, Digits) {
  const json separate = {{"type", "Digits"}, {"individual_digits", true}};
  const json together = {{"type", "Digits"}, {"individual_digits", false}};
  EXPECT_EQ(PreTokenize(Then(together), "Hey 123 friend!"), (Words{"Hey ", "123", " friend!"}));
  EXPECT_EQ(PreTokenize(Then(separate), "Hey 123 friend!"), (Words{"Hey ", "1", "2", "3", " friend!"}));
}

TEST(PreTokenizer, SplitBehaviorsInverted) {
  auto split = [](const char* behavior) {
    return Then({{"type", "Split"}, {"pattern", {{"Regex", "\\w+|[^\\w\\s]+"}}},
                 {"behavior", behavior}, {"invert", true}});
  };
  const std::string s = "How are you doing?";
  EXPECT_EQ(PreTokenize(split("Removed"), s), (Words{"How", "are", "you", "doing", "?"}));
  EXPECT_EQ(PreTokenize(split("Isolated"), s), (Words{"How", " ", "are", " ", "you", " ", "doing", "?"}));
  EXPECT_EQ(PreTokenize(split("MergedWithPrevious"), s), (Words{"How ", "are ", "you ", "doing", "?"}));
  EXPECT_EQ(PreTokenize(split("MergedWithNext"), s), (Words{"How", " are", " you", " doing", "?"}));
  EXPECT_EQ(PreTokenize(split("Contiguous"), s), (Words{"How", " ", "are", " ", "you", " ", "doing?"}));
}

TEST(PreTokenizer, SplitStringEqualsRegexAndInvert) {
  const json by_regex = Then({{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}},
                              {"behavior", "Removed"}, {"invert", false}});
  const json by_string = Then({{"type", "Split"}, {"pattern", {{"String", " "}}},
                               {"behavior", "Removed"}, {"invert", false}});
  EXPECT_EQ(PreTokenize(by_regex, "Hey, man!"), PreTokenize(by_string, "Hey, man!"));
  const json inverted = Then({{"type", "Split"}, {"pattern", {{"String", "Hello"}}},
                              {"behavior", "Removed"}, {"invert", true}});
  EXPECT_EQ(PreTokenize(by_string, "Hello Hello Hello"), PreTokenize(inverted, "Hello Hello Hello"));
  // Regex metacharacters in a String pattern are literal.
  const json dots = Then({{"type", "Split"}, {"pattern", {{"String", ".*"}}},
                          {"behavior", "Isolated"}, {"invert", false}});
  EXPECT_EQ(PreTokenize(dots, "a.*b.c"), (Words{"a", ".*", "b.c"}));
}

// Seeded random strings over tricky characters (Unicode spaces, marks,
// numerics, emoji, NUL) split by an independent implementation: Python's
// `regex` module (testdata/make_gpt2_split_cases.py).
TEST(PreTokenizer, MatchesIndependentGpt2Split) {
  const std::string path =
      std::string(LOCKSTEP_SOURCE_DIR) + "/tests/tokenizer/testdata/gpt2_split_cases.json";
  std::ifstream in(path);
  ASSERT_TRUE(in) << "missing " << path;
  const json doc = json::parse(in);
  const json smol = {{"type", "Sequence"},
                     {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}},
                                        ByteLevel(false)}}};
  auto chain = PreTokenizerChain::Parse(smol, "smol");
  ASSERT_TRUE(chain.ok());
  size_t checked = 0;
  for (const json& c : doc.at("cases")) {
    const std::string text = c.at("text");
    EXPECT_EQ(SplitWords(*chain, text), c.at("words").get<Words>()) << json(text).dump();
    ++checked;
  }
  EXPECT_EQ(checked, 800u);
}

}  // namespace
}  // namespace lockstep
