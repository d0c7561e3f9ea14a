// Golden tests against independent fixtures: CIS-2 §3.1.7, the conformance
// tokenizer vectors, the near-match (pair-merges) file and the tiny models.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/tokenizer/tokenizer.h"
#include "tests/fixture_absent.h"
#include "tests/tokenizer/test_util.h"

namespace lockstep {
namespace {

using testing::ReadFile;
using testing::SharedExists;
using testing::SharedPath;

constexpr char kVectors[] = "fixtures/conformance/tokenizer-vectors.json";
constexpr char kNearMatch[] =
    "fixtures/near-match/smollm2-135m-instruct-tokenizer-wave-transformer/tokenizer.json";

TEST(TokenizerFixtures, WorkedExampleSection317) {
  LOCKSTEP_REQUIRE_SMOL();
  EXPECT_EQ(smol->Encode("Once upon a time"),
            (std::vector<uint32_t>{6403, 1980, 253, 655}));
  EXPECT_EQ(smol->vocab_size(), 49152u);
  EXPECT_EQ(smol->TokenToId("Once"), 6403u);
  EXPECT_EQ(smol->TokenToId("\xC4\xA0upon"), 1980u);  // "Ġupon"
}

std::vector<nlohmann::json> VectorCases() {
  if (!SharedExists(kVectors)) return {};
  const auto doc = nlohmann::json::parse(ReadFile(SharedPath(kVectors)));
  return doc.at("cases").get<std::vector<nlohmann::json>>();
}

TEST(TokenizerFixtures, ConformanceVectorsIdsAndDecoded) {
  LOCKSTEP_REQUIRE_SMOL();
  const auto cases = VectorCases();
  if (cases.empty()) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << SharedPath(kVectors);
  for (const auto& c : cases) {
    const std::string text = c.at("text");
    const auto want = c.at("ids").get<std::vector<uint32_t>>();
    const auto got = smol->Encode(text);
    EXPECT_EQ(got, want) << "text: " << text;
    EXPECT_EQ(smol->Decode(want), c.at("decoded").get<std::string>()) << "text: " << text;
  }
}

TEST(TokenizerFixtures, PairMergesFileGivesSameIds) {
  LOCKSTEP_REQUIRE_SMOL();
  if (!SharedExists(kNearMatch)) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << SharedPath(kNearMatch);
  auto near = Tokenizer::FromFile(SharedPath(kNearMatch));
  ASSERT_TRUE(near.ok()) << near.status().ToString();
  EXPECT_EQ(near->vocab_size(), smol->vocab_size());
  std::vector<std::string> texts = {
      "", " ", "Once upon a time", "The quick brown fox jumps over the lazy dog.",
      "def f(x):\n    return x**2  # square\n", "  \t\n\n  mixed   whitespace \r\n",
      "Größe, naïve café, Ærøskøbing", "日本語のテキスト、中文文本。", "مرحبا بالعالم",
      "नमस्ते दुनिया", "😀🚀👩‍👩‍👧 emoji", "e\xCC\x81 combining", "<|im_start|>user\nhi<|im_end|>",
      "1234567890 ١٢٣ ½ Ⅻ", "I'll we've they'd she's YOU'RE", std::string("nul\0byte", 8),
      "ends with spaces   ", "tokenization of antidisestablishmentarianism"};
  for (const auto& c : VectorCases()) texts.push_back(c.at("text"));
  // And seeded random mixtures of words, scripts, digits and spacing.
  const std::vector<std::string> parts = {"the", " cat", "  ", "\n", "42", "'s", "!?", "\xC3\xA9t\xC3\xA9",
                                          "\xE6\x97\xA5\xE6\x9C\xAC", "\xF0\x9F\x98\x80", "\t", " ",
                                          "<|im_end|>", "don't", "\xD9\x85\xD8\xB1", "x=1;"};
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {
    std::string t;
    for (int n = static_cast<int>(rng() % 12); n > 0; --n) t += parts[rng() % parts.size()];
    texts.push_back(t);
  }
  for (const std::string& t : texts) EXPECT_EQ(near->Encode(t), smol->Encode(t)) << t;
}

// Ids from an independent reference (testdata/make_smollm2_cases.py:
// Python regex + classic GPT-2 BPE loop) on seeded random texts.
TEST(TokenizerFixtures, MatchesIndependentReferenceOnRandomTexts) {
  LOCKSTEP_REQUIRE_SMOL();
  const std::string path =
      std::string(LOCKSTEP_SOURCE_DIR) + "/tests/tokenizer/testdata/smollm2_cases.json";
  const std::string text = ReadFile(path);
  ASSERT_FALSE(text.empty()) << "missing " << path;
  const auto cases = nlohmann::json::parse(text).at("cases");
  ASSERT_EQ(cases.size(), 400u);
  for (const auto& c : cases) {
    const std::string t = c.at("text");
    EXPECT_EQ(smol->Encode(t), c.at("ids").get<std::vector<uint32_t>>()) << nlohmann::json(t).dump();
  }
}

TEST(TokenizerFixtures, TinyLlamaOnceUponATime) {
  const std::string rel = "fixtures/conformance/tiny-llama/tokenizer.json";
  if (!SharedExists(rel)) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << SharedPath(rel);
  auto tok = Tokenizer::FromFile(SharedPath(rel));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  const auto ids = tok->Encode("Once upon a time");
  EXPECT_EQ(ids, (std::vector<uint32_t>{82, 113, 348, 384, 303, 261, 310}));
  EXPECT_EQ(tok->Decode(ids), "Once upon a time");
}

TEST(TokenizerFixtures, TinyTokenizersLoadAndRoundTrip) {
  for (const char* name : {"tiny-daz", "tiny-llama", "tiny-qwen"}) {
    const std::string rel = std::string("fixtures/conformance/") + name + "/tokenizer.json";
    if (!SharedExists(rel)) continue;
    auto tok = Tokenizer::FromFile(SharedPath(rel));
    ASSERT_TRUE(tok.ok()) << name << ": " << tok.status().ToString();
    const std::string text = "Hello world, 42 cats! \xE2\x82\xAC\n<|endoftext|>";
    const auto ids = tok->Encode(text);
    for (uint32_t id : ids) EXPECT_LT(id, tok->vocab_size()) << name;
    EXPECT_EQ(tok->Decode(ids), text) << name;
    EXPECT_EQ(ids.back(), 0u) << name;  // <|endoftext|> matched as one token
  }
}

}  // namespace
}  // namespace lockstep
