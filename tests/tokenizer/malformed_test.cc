// Damaged or unsupported tokenizer.json files: each gives a clear error of
// the right kind naming the file and the field, never a crash or a silently
// different tokenization.
#include <functional>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/synthetic_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace lockstep {
namespace {

using json = nlohmann::json;

json Base() {
  auto text = SyntheticTokenizerJson(300, 1);
  EXPECT_TRUE(text.ok());
  return json::parse(text.value());
}

// Loads Base() after `edit`; expects an error of `kind` mentioning `field`.
void ExpectError(const std::function<void(json&)>& edit, ErrorKind kind, const std::string& field) {
  json j = Base();
  edit(j);
  auto t = Tokenizer::FromJson(j.dump(), "bad.json");
  ASSERT_FALSE(t.ok()) << "accepted; field " << field;
  EXPECT_EQ(t.status().kind(), kind) << t.status().ToString();
  EXPECT_NE(t.status().message().find("bad.json"), std::string::npos) << t.status().ToString();
  EXPECT_NE(t.status().message().find(field), std::string::npos) << t.status().ToString();
}

TEST(TokenizerMalformed, BaseIsValid) {
  auto t = Tokenizer::FromJson(Base().dump(), "good.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
}

TEST(TokenizerMalformed, NotJson) {
  for (const std::string text : {"", "{", "[1,2]", "{\"model\": }", "null", "\"str\""}) {
    auto t = Tokenizer::FromJson(text, "bad.json");
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().kind(), ErrorKind::kInvalid);
    EXPECT_NE(t.status().message().find("bad.json"), std::string::npos);
  }
}

TEST(TokenizerMalformed, MissingOrOddFile) {
  auto t = Tokenizer::FromFile("/nonexistent/dir/tokenizer.json");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(t.status().message().find("/nonexistent/dir/tokenizer.json"), std::string::npos);
  auto dir = Tokenizer::FromFile(LOCKSTEP_SOURCE_DIR);  // a directory
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().kind(), ErrorKind::kInvalid);
  EXPECT_FALSE(Tokenizer::FromFile("/dev/null").ok());
}

// Nesting is bounded like every JSON reader's (base/json.h), and a key
// given twice is refused by name, never silently the last one.
TEST(TokenizerMalformed, DeepNestingAndRepeatedKeys) {
  const std::string base = Base().dump();
  std::string deep = base;
  deep.insert(deep.size() - 1, ",\"x\": " + std::string(100000, '[') + std::string(100000, ']'));
  auto t = Tokenizer::FromJson(deep, "bad.json");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("nested deeper than 64"), std::string::npos) << t.status().ToString();
  for (const std::string key : {"normalizer", "vocab", "merges", "type"}) {
    std::string twice = base;
    const size_t at = key == "normalizer" ? 1 : twice.find("\"model\":{") + 9;
    twice.insert(at, "\"" + key + "\":null,");
    auto d = Tokenizer::FromJson(twice, "bad.json");
    ASSERT_FALSE(d.ok()) << key;
    EXPECT_NE(d.status().message().find("duplicate JSON key \"" + key + "\""), std::string::npos)
        << d.status().ToString();
  }
}

TEST(TokenizerMalformed, Model) {
  ExpectError([](json& j) { j.erase("model"); }, ErrorKind::kInvalid, "model");
  ExpectError([](json& j) { j["model"]["type"] = "WordPiece"; }, ErrorKind::kUnimplemented, "model.type");
  ExpectError([](json& j) { j["model"].erase("vocab"); }, ErrorKind::kInvalid, "model.vocab");
  ExpectError([](json& j) { j["model"].erase("merges"); }, ErrorKind::kInvalid, "model.merges");
  ExpectError([](json& j) { j["model"]["vocab"]["zzz"] = 5; }, ErrorKind::kInvalid, "model.vocab");
  ExpectError([](json& j) { j["model"]["vocab"]["zzz"] = -1; }, ErrorKind::kInvalid, "model.vocab");
  ExpectError([](json& j) { j["model"]["vocab"]["zzz"] = "7"; }, ErrorKind::kInvalid, "model.vocab");
  ExpectError([](json& j) { j["model"]["vocab"]["zzz"] = 1.5; }, ErrorKind::kInvalid, "model.vocab");
  ExpectError([](json& j) { j["model"]["dropout"] = 0.1; }, ErrorKind::kUnimplemented, "model.dropout");
  ExpectError([](json& j) { j["model"]["byte_fallback"] = true; }, ErrorKind::kUnimplemented,
              "model.byte_fallback");
  ExpectError([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
              ErrorKind::kUnimplemented, "model.continuing_subword_prefix");
  ExpectError([](json& j) { j["model"]["end_of_word_suffix"] = "</w>"; },
              ErrorKind::kUnimplemented, "model.end_of_word_suffix");
  ExpectError([](json& j) { j["model"]["unk_token"] = "<unk>"; }, ErrorKind::kInvalid, "unk_token");
  ExpectError([](json& j) { j["model"]["fuse_unk"] = "yes"; }, ErrorKind::kInvalid, "model.fuse_unk");
}

TEST(TokenizerMalformed, Merges) {
  ExpectError([](json& j) { j["model"]["merges"].push_back("a b c"); }, ErrorKind::kInvalid, "model.merges[");
  ExpectError([](json& j) { j["model"]["merges"].push_back("ab"); }, ErrorKind::kInvalid, "model.merges[");
  ExpectError([](json& j) { j["model"]["merges"].push_back(json::array({"a", "b", "c"})); },
              ErrorKind::kInvalid, "model.merges[");
  ExpectError([](json& j) { j["model"]["merges"].push_back(json::array({"a"})); },
              ErrorKind::kInvalid, "model.merges[");
  ExpectError([](json& j) { j["model"]["merges"].push_back(json::array({"a", 3})); },
              ErrorKind::kInvalid, "model.merges");
  ExpectError([](json& j) { j["model"]["merges"].push_back("a NOTINVOCAB"); }, ErrorKind::kInvalid,
              "\"NOTINVOCAB\" is not in the vocab");
  // Both halves exist but their concatenation does not.
  ExpectError([](json& j) { j["model"]["merges"].push_back("q z"); }, ErrorKind::kInvalid,
              "merged \"qz\" is not in the vocab");
  ExpectError([](json& j) { j["model"]["merges"] = 5; }, ErrorKind::kInvalid, "model.merges");
}

TEST(TokenizerMalformed, AddedTokens) {
  ExpectError([](json& j) { j["added_tokens"][0]["id"] = -3; }, ErrorKind::kInvalid, "added_tokens[0].id");
  ExpectError([](json& j) { j["added_tokens"][1]["content"] = ""; }, ErrorKind::kInvalid,
              "added_tokens[1].content");
  ExpectError([](json& j) { j["added_tokens"][2]["lstrip"] = 1; }, ErrorKind::kInvalid,
              "added_tokens[2].lstrip");
  ExpectError([](json& j) { j["added_tokens"].push_back(j["added_tokens"][0]); }, ErrorKind::kInvalid,
              "added_tokens[3].content");
  // The crate would give "<|im_end|>" its vocab id 2, not 7.
  ExpectError([](json& j) { j["added_tokens"][2]["id"] = 7; }, ErrorKind::kInvalid, "added_tokens[2].id");
  ExpectError([](json& j) { j["added_tokens"] = "x"; }, ErrorKind::kInvalid, "added_tokens");
}

TEST(TokenizerMalformed, PipelineComponents) {
  ExpectError([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; }, ErrorKind::kUnimplemented,
              "normalizer.type");
  ExpectError([](json& j) {
    j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}, {{"type", "Strip"}}}}};
  }, ErrorKind::kUnimplemented, "normalizer.normalizers[1].type");
  ExpectError([](json& j) { j["normalizer"] = {{"type", "Sequence"}}; }, ErrorKind::kInvalid,
              "normalizer.normalizers");
  ExpectError([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }, ErrorKind::kUnimplemented,
              "pre_tokenizer.type");
  ExpectError([](json& j) { j["pre_tokenizer"] = nullptr; }, ErrorKind::kUnimplemented, "pre_tokenizer");
  ExpectError([](json& j) { j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", true}}; },
              ErrorKind::kUnimplemented, "pre_tokenizer");
  ExpectError([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["individual_digits"] = "yes"; },
              ErrorKind::kInvalid, "pre_tokenizer.pretokenizers[0].individual_digits");
  ExpectError([](json& j) {
    j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}},
                                              {"behavior", "Isolated"}, {"invert", false}};
  }, ErrorKind::kInvalid, "pre_tokenizer.pretokenizers[0].pattern");
  ExpectError([](json& j) {
    j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Split"}, {"pattern", {{"Regex", "a"}}},
                                              {"behavior", "Sideways"}, {"invert", false}};
  }, ErrorKind::kInvalid, "behavior");
  ExpectError([](json& j) {
    j["pre_tokenizer"]["pretokenizers"][0] = {{"type", "Split"}, {"pattern", {{"Regex", "\\h+"}}},
                                              {"behavior", "Isolated"}, {"invert", false}};
  }, ErrorKind::kUnimplemented, "pre_tokenizer.pretokenizers[0].pattern");
  ExpectError([](json& j) { j["pre_tokenizer"]["pretokenizers"].push_back({{"type", "Digits"}}); },
              ErrorKind::kUnimplemented, "after ByteLevel");
  ExpectError([](json& j) { j["post_processor"] = {{"type", "TemplateProcessing"}}; },
              ErrorKind::kUnimplemented, "post_processor");
  ExpectError([](json& j) { j["decoder"] = nullptr; }, ErrorKind::kUnimplemented, "decoder");
  ExpectError([](json& j) { j["decoder"] = {{"type", "WordPiece"}}; }, ErrorKind::kUnimplemented, "decoder");
  ExpectError([](json& j) { j["truncation"] = {{"max_length", 5}}; }, ErrorKind::kUnimplemented, "truncation");
  ExpectError([](json& j) { j["padding"] = {{"strategy", "BatchLongest"}}; }, ErrorKind::kUnimplemented,
              "padding");
  ExpectError([](json& j) { j["version"] = "2.0"; }, ErrorKind::kInvalid, "version");
}

// Seeded damage to a valid file: truncation, byte flips, deleted ranges.
// Loading must return (ok or an error), and whatever loads must encode.
TEST(TokenizerMalformed, SeededDamageNeverCrashes) {
  const std::string good = SyntheticTokenizerJson(300, 3).value();
  std::mt19937_64 rng(99);
  int loaded = 0, refused = 0;
  for (int i = 0; i < 300; ++i) {
    std::string bad = good;
    switch (rng() % 3) {
      case 0: bad.resize(rng() % bad.size()); break;
      case 1:
        for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = static_cast<char>(rng() % 256);
        break;
      default: {
        const size_t at = rng() % bad.size();
        bad.erase(at, rng() % 64);
      }
    }
    auto t = Tokenizer::FromJson(bad, "damaged.json");
    if (!t.ok()) {
      ++refused;
      EXPECT_NE(t.status().message().find("damaged.json"), std::string::npos);
      continue;
    }
    ++loaded;
    for (uint32_t id : t->Encode("Once upon a time, 42 <|im_end|>!")) EXPECT_LT(id, t->vocab_size());
  }
  EXPECT_GT(refused, 100);
  EXPECT_EQ(loaded + refused, 300);
}

TEST(TokenizerMalformed, SparseHugeIdsAreRefused) {
  ExpectError([](json& j) { j["model"]["vocab"]["zzz"] = 4000000000u; }, ErrorKind::kInvalid,
              "model.vocab[\"zzz\"]");
}

TEST(TokenizerMalformed, UnicodeNormalizers) {
  json j = Base();
  const std::string decomposed = "e\xCC\x81", composed = "\xC3\xA9";  // é
  auto plain = Tokenizer::FromJson(j.dump(), "plain.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_NE(plain->Encode(decomposed), plain->Encode(composed));
  // A normalized added token is matched by its normalized form, after the
  // input is normalized; ids of new added tokens follow the vocab.
  j["added_tokens"].push_back({{"id", 300}, {"content", decomposed + "x"}, {"single_word", false},
                               {"lstrip", false}, {"rstrip", false}, {"normalized", true},
                               {"special", false}});
  j["normalizer"] = {{"type", "NFC"}};
  auto nfc = Tokenizer::FromJson(j.dump(), "nfc.json");
  ASSERT_TRUE(nfc.ok()) << nfc.status().ToString();
  EXPECT_EQ(nfc->Encode(decomposed), nfc->Encode(composed));
  EXPECT_EQ(nfc->Encode(composed + "x"), std::vector<uint32_t>{300});
  EXPECT_EQ(nfc->Encode(decomposed + "x"), std::vector<uint32_t>{300});
  EXPECT_EQ(nfc->vocab_size(), 301u);
  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}}}};
  auto nfkc = Tokenizer::FromJson(j.dump(), "nfkc.json");
  ASSERT_TRUE(nfkc.ok()) << nfkc.status().ToString();
  EXPECT_EQ(nfkc->Encode("\xEF\xAC\x81"), nfkc->Encode("fi"));  // U+FB01 ligature
  j["normalizer"] = {{"type", "NFD"}};
  auto nfd = Tokenizer::FromJson(j.dump(), "nfd.json");
  ASSERT_TRUE(nfd.ok()) << nfd.status().ToString();
  EXPECT_EQ(nfd->Encode(composed), plain->Encode(decomposed));
}

TEST(TokenizerMalformed, SupportedVariantsLoad) {
  // A Qwen2-style Split + ByteLevel(use_regex=false) chain loads and encodes.
  json j = Base();
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {{{"type", "Split"},
         {"pattern", {{"Regex", "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
         {"behavior", "Isolated"}, {"invert", false}},
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
  j["post_processor"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false},
                         {"use_regex", false}};
  auto t = Tokenizer::FromJson(j.dump(), "qwen-like.json");
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->Decode(t->Encode("It's 42 o'clock!\n\nok")), "It's 42 o'clock!\n\nok");
}

}  // namespace
}  // namespace lockstep
