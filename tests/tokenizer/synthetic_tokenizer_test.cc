#include "engine/tokenizer/synthetic_tokenizer.h"

#include <string>

#include <gtest/gtest.h>

#include "engine/tokenizer/tokenizer.h"

namespace lockstep {
namespace {

TEST(SyntheticTokenizer, DeterministicPerSeedAndVariesAcrossSeeds) {
  auto a = SyntheticTokenizerJson(512, 42);
  auto b = SyntheticTokenizerJson(512, 42);
  auto c = SyntheticTokenizerJson(512, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a.value(), b.value());
  EXPECT_NE(a.value(), c.value());
}

TEST(SyntheticTokenizer, ExactSizeLoadsAndRoundTrips) {
  for (uint32_t size : {kMinSyntheticVocabSize, 300u, 512u, 2048u}) {
    auto json = SyntheticTokenizerJson(size, 7);
    ASSERT_TRUE(json.ok()) << json.status().ToString();
    auto t = Tokenizer::FromJson(json.value(), "synthetic");
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->vocab_size(), size);
    EXPECT_EQ(t->TokenToId("<|endoftext|>"), 0u);
    EXPECT_EQ(t->TokenToId("<|im_start|>"), 1u);
    EXPECT_EQ(t->TokenToId("<|im_end|>"), 2u);
    EXPECT_EQ(t->TokenToId("!"), 3u + '!');
    const std::string text = "<|im_start|>Once upon a time, 3 foxes \xE2\x98\x95\n<|im_end|>";
    const auto ids = t->Encode(text);
    for (uint32_t id : ids) EXPECT_LT(id, size);
    EXPECT_EQ(t->Decode(ids), text);
  }
}

TEST(SyntheticTokenizer, EnglishWordsMerge) {
  auto t = Tokenizer::FromJson(SyntheticTokenizerJson(512, 1).value(), "synthetic");
  ASSERT_TRUE(t.ok());
  const std::string text = "the little girl was in the forest and the";
  EXPECT_LT(t->Encode(text).size(), text.size() / 2);
}

TEST(SyntheticTokenizer, RejectsSizesOutOfRange) {
  EXPECT_EQ(SyntheticTokenizerJson(259, 1).status().kind(), ErrorKind::kInvalid);
  EXPECT_EQ(SyntheticTokenizerJson(kMinSyntheticVocabSize - 1, 1).status().kind(), ErrorKind::kInvalid);
  EXPECT_EQ(SyntheticTokenizerJson(kMaxSyntheticVocabSize + 1, 1).status().kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep
