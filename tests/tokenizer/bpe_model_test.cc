// The merge loop on small hand-made models. Expected results follow from
// the rules of CIS-2 §3.1.5.c or are the crate's own unit-test examples.
#include "engine/tokenizer/bpe_model.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tokenizer/byte_unicode.h"

namespace lockstep {
namespace {

using Vocab = std::vector<std::pair<std::string, uint32_t>>;
using Merges = std::vector<std::pair<std::string, std::string>>;

std::vector<uint32_t> EncodeAll(const BpeModel& m, const std::string& word) {
  std::vector<uint32_t> out;
  WordCache cache;
  m.EncodeWord(word, &cache, &out);
  std::vector<uint32_t> again;
  m.EncodeWord(word, &cache, &again);  // served from the cache
  EXPECT_EQ(out, again);
  return out;
}

TEST(BpeModel, CrateUnrelatedExample) {
  const Vocab vocab = {{"u", 0}, {"n", 1}, {"r", 2}, {"e", 3}, {"l", 4}, {"a", 5},
                       {"t", 6}, {"d", 7}, {"re", 8}, {"at", 9}, {"ed", 10}, {"un", 11},
                       {"ated", 12}, {"rel", 13}, {"related", 14}, {"unrelated", 15}};
  const Merges merges = {{"r", "e"}, {"a", "t"}, {"e", "d"}, {"u", "n"},
                         {"at", "ed"}, {"re", "l"}, {"rel", "ated"}, {"un", "related"}};
  auto m = BpeModel::Build(vocab, merges, {}, "test");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(EncodeAll(*m, "unrelated"), std::vector<uint32_t>{15});
}

TEST(BpeModel, LowestRankFirstThenLeftmost) {
  const Vocab vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"aa", 5}};
  // "b c" outranks "a b": "abc" -> a, bc.
  auto m = BpeModel::Build(vocab, {{"b", "c"}, {"a", "b"}, {"a", "a"}}, {}, "test");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(EncodeAll(*m, "abc"), (std::vector<uint32_t>{0, 4}));
  // Equal rank at two positions: the leftmost wins: "aaa" -> aa, a.
  EXPECT_EQ(EncodeAll(*m, "aaa"), (std::vector<uint32_t>{5, 0}));
  EXPECT_EQ(EncodeAll(*m, "aaaa"), (std::vector<uint32_t>{5, 5}));
  auto m2 = BpeModel::Build(vocab, {{"a", "b"}, {"b", "c"}}, {}, "test");
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(EncodeAll(*m2, "abc"), (std::vector<uint32_t>{3, 2}));
}

TEST(BpeModel, ByteSymbolsAndMissingBytes) {
  // Space is looked up as its byte-level symbol "Ġ".
  const Vocab vocab = {{ByteToSymbol(' '), 0}, {"a", 1}, {ByteToSymbol(' ') + "a", 2}};
  auto m = BpeModel::Build(vocab, {{ByteToSymbol(' '), "a"}}, {}, "test");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(EncodeAll(*m, " a"), std::vector<uint32_t>{2});
  // 'b' has no symbol and no unk: dropped; its neighbours become adjacent.
  EXPECT_EQ(EncodeAll(*m, " ba"), std::vector<uint32_t>{2});
  EXPECT_TRUE(EncodeAll(*m, "bbb").empty());
}

TEST(BpeModel, UnkFusedOrNot) {
  // The crate's test_unk_not_fused / test_unk_get_fused examples.
  const Vocab vocab = {{"<unk>", 0}, {"a", 1}, {"b", 2}};
  BpeOptions plain;
  plain.unk_token = "<unk>";
  auto m = BpeModel::Build(vocab, {}, plain, "test");
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(EncodeAll(*m, "accb"), (std::vector<uint32_t>{1, 0, 0, 2}));
  BpeOptions fused = plain;
  fused.fuse_unk = true;
  auto f = BpeModel::Build(vocab, {}, fused, "test");
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(EncodeAll(*f, "accb"), (std::vector<uint32_t>{1, 0, 2}));
  EXPECT_EQ(EncodeAll(*f, "cc"), (std::vector<uint32_t>{0}));
}

TEST(BpeModel, IgnoreMerges) {
  const Vocab vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"abc", 3}};
  BpeOptions opts;
  opts.ignore_merges = true;
  auto with = BpeModel::Build(vocab, {}, opts, "test");
  auto without = BpeModel::Build(vocab, {}, {}, "test");
  ASSERT_TRUE(with.ok() && without.ok());
  EXPECT_EQ(EncodeAll(*with, "abc"), std::vector<uint32_t>{3});
  EXPECT_EQ(EncodeAll(*without, "abc"), (std::vector<uint32_t>{0, 1, 2}));
}

TEST(BpeModel, BuildErrors) {
  EXPECT_EQ(BpeModel::Build({{"a", 0}, {"b", 0}}, {}, {}, "f.json: model").status().kind(),
            ErrorKind::kInvalid);
  auto missing = BpeModel::Build({{"a", 0}, {"b", 1}}, {{"a", "x"}}, {}, "f.json: model");
  EXPECT_EQ(missing.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(missing.status().message().find("f.json: model.merges[0]"), std::string::npos);
  auto no_concat = BpeModel::Build({{"a", 0}, {"b", 1}}, {{"a", "b"}}, {}, "m");
  EXPECT_NE(no_concat.status().message().find("\"ab\" is not in the vocab"), std::string::npos);
  BpeOptions unk;
  unk.unk_token = "<unk>";
  EXPECT_EQ(BpeModel::Build({{"a", 0}}, {}, unk, "m").status().kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep
