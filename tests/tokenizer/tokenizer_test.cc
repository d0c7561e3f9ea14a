// Behaviour of Tokenizer on the real SmolLM2 tokenizer. Expected ids come
// from equalities implied by CIS-2 §3.1.4 (how text splits into words), not
// from pasted output.
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/tokenizer/utf8.h"
#include "tests/tokenizer/test_util.h"

namespace lockstep {
namespace {

using testing::Concat;

TEST(Tokenizer, EmptyInput) {
  LOCKSTEP_REQUIRE_SMOL();
  EXPECT_TRUE(smol->Encode("").empty());
  EXPECT_EQ(smol->Decode({}), "");
}

TEST(Tokenizer, DigitsAreSplitIndividually) {
  LOCKSTEP_REQUIRE_SMOL();
  const auto ids = smol->Encode("12345");
  ASSERT_EQ(ids.size(), 5u);
  for (int d = 0; d < 5; ++d) {
    EXPECT_EQ(ids[d], *smol->TokenToId(std::string(1, static_cast<char>('1' + d))));
  }
  // Other Unicode numerics (Nd Arabic-Indic, No vulgar fraction, Nl roman
  // numeral) are isolated one character at a time too.
  EXPECT_EQ(smol->Encode("\xD9\xA1\xD9\xA2"),  // "١٢"
            Concat({smol->Encode("\xD9\xA1"), smol->Encode("\xD9\xA2")}));
  EXPECT_EQ(smol->Encode("x\xC2\xBD\xE2\x85\xAB"),  // "x½Ⅻ"
            Concat({smol->Encode("x"), smol->Encode("\xC2\xBD"), smol->Encode("\xE2\x85\xAB")}));
  EXPECT_EQ(smol->Encode("a 42"),
            Concat({smol->Encode("a"), smol->Encode(" "), smol->Encode("4"), smol->Encode("2")}));
}

TEST(Tokenizer, Contractions) {
  LOCKSTEP_REQUIRE_SMOL();
  for (const char* suffix : {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"}) {
    const std::string s = std::string("they") + suffix;
    EXPECT_EQ(smol->Encode(s), Concat({smol->Encode("they"), smol->Encode(suffix)})) << s;
  }
  // Upper-case suffixes are not contractions: "'" then the letters.
  EXPECT_EQ(smol->Encode("WON'T"),
            Concat({smol->Encode("WON"), smol->Encode("'"), smol->Encode("T")}));
}

TEST(Tokenizer, SpacesNewlinesAndTabs) {
  LOCKSTEP_REQUIRE_SMOL();
  // "\s+(?!\S)" leaves the last space of a run to the next word.
  EXPECT_EQ(smol->Encode("a   b"),
            Concat({smol->Encode("a"), smol->Encode("  "), smol->Encode(" b")}));
  EXPECT_EQ(smol->Encode("   lead"), Concat({smol->Encode("  "), smol->Encode(" lead")}));
  EXPECT_EQ(smol->Encode("trail   "), Concat({smol->Encode("trail"), smol->Encode("   ")}));
  EXPECT_EQ(smol->Encode("a\n\nb"),
            Concat({smol->Encode("a"), smol->Encode("\n"), smol->Encode("\n"), smol->Encode("b")}));
  EXPECT_EQ(smol->Encode("a\tb"),
            Concat({smol->Encode("a"), smol->Encode("\t"), smol->Encode("b")}));
  EXPECT_EQ(smol->Encode("a \t b"),
            Concat({smol->Encode("a"), smol->Encode(" \t"), smol->Encode(" b")}));
  // Digits split first, and each split is matched on its own: the regex's
  // lookahead does not see the digit, so both spaces stay together.
  EXPECT_EQ(smol->Encode("a  1"),
            Concat({smol->Encode("a"), smol->Encode("  "), smol->Encode("1")}));
  EXPECT_EQ(smol->Encode(" "), std::vector<uint32_t>{*smol->TokenToId("\xC4\xA0")});  // Ġ
  EXPECT_EQ(smol->Encode("\n"), std::vector<uint32_t>{*smol->TokenToId("\xC4\x8A")});  // Ċ
  // U+3000 ideographic space and U+0085 NEL are \s for the pattern.
  EXPECT_EQ(smol->Encode("a\xE3\x80\x80" "b"),
            Concat({smol->Encode("a"), smol->Encode("\xE3\x80\x80"), smol->Encode("b")}));
  EXPECT_EQ(smol->Encode("a\xC2\x85" "b"),
            Concat({smol->Encode("a"), smol->Encode("\xC2\x85"), smol->Encode("b")}));
}

TEST(Tokenizer, ScriptsAndMarks) {
  LOCKSTEP_REQUIRE_SMOL();
  // Letters with a leading space form one word.
  EXPECT_EQ(smol->Encode("\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD8\xA8\xD9\x83"),  // "مرحبا بك"
            Concat({smol->Encode("\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7"),
                    smol->Encode(" \xD8\xA8\xD9\x83")}));
  // Devanagari: vowel signs and virama are marks (not \p{L}), so they split.
  // "नमस्ते" = न म स ्(Mn) त े(Mn)
  EXPECT_EQ(smol->Encode("\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87"),
            Concat({smol->Encode("\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8"), smol->Encode("\xE0\xA5\x8D"),
                    smol->Encode("\xE0\xA4\xA4"), smol->Encode("\xE0\xA5\x87")}));
  // Combining acute after a letter: "e" then the mark.
  EXPECT_EQ(smol->Encode("e\xCC\x81"), Concat({smol->Encode("e"), smol->Encode("\xCC\x81")}));
  // Emoji are punctuation-like runs; a following letter starts a new word.
  EXPECT_EQ(smol->Encode("\xF0\x9F\x98\x80\xF0\x9F\x9A\x80go"),
            Concat({smol->Encode("\xF0\x9F\x98\x80\xF0\x9F\x9A\x80"), smol->Encode("go")}));
  for (const std::string s : {"日本語のテキスト", "中文文本，标点。", "مرحبا بالعالم",
                              "नमस्ते दुनिया", "😀 👩‍👩‍👧 🚀", "e\xCC\x81\xCC\x82 Z\xCD\x91",
                              "한국어 텍스트", "Ελληνικά κείμενα", "עברית"}) {
    const auto ids = smol->Encode(s);
    EXPECT_FALSE(ids.empty()) << s;
    EXPECT_EQ(smol->Decode(ids), s);
  }
}

TEST(Tokenizer, SpecialTokensInsideText) {
  LOCKSTEP_REQUIRE_SMOL();
  const uint32_t start = *smol->TokenToId("<|im_start|>");
  const uint32_t end = *smol->TokenToId("<|im_end|>");
  EXPECT_EQ(start, 1u);
  EXPECT_EQ(end, 2u);
  EXPECT_EQ(smol->Encode("<|im_start|>user\nhi there<|im_end|>"),
            Concat({{start}, smol->Encode("user\nhi there"), {end}}));
  EXPECT_EQ(smol->Encode("a<|endoftext|><|endoftext|> b"),
            Concat({smol->Encode("a"), {0, 0}, smol->Encode(" b")}));
  // An incomplete marker is ordinary text.
  EXPECT_EQ(smol->Encode("<|im_start"), Concat({smol->Encode("<|"), smol->Encode("im"),
                                                smol->Encode("_"), smol->Encode("start")}));
  EXPECT_EQ(smol->Decode(Concat({{start}, smol->Encode("x"), {end}})), "<|im_start|>x<|im_end|>");
}

TEST(Tokenizer, InvalidUtf8IsReplacedLikeFromUtf8Lossy) {
  LOCKSTEP_REQUIRE_SMOL();
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(smol->Encode("\xFF"), smol->Encode(fffd));
  EXPECT_EQ(smol->Encode("a\xC3(b"), smol->Encode("a" + fffd + "(b"));
  EXPECT_EQ(smol->Encode("x\xE2\x82"), smol->Encode("x" + fffd));  // truncated: one U+FFFD
  EXPECT_EQ(smol->Encode("\xED\xA0\x80"), smol->Encode(fffd + fffd + fffd));  // surrogate
  EXPECT_EQ(smol->Encode("\xC0\xAF"), smol->Encode(fffd + fffd));  // overlong
  EXPECT_EQ(smol->Decode(smol->Encode("ok\xF0\x9F\x98")), "ok" + fffd);
}

TEST(Tokenizer, NulIsAnOrdinaryCharacter) {
  LOCKSTEP_REQUIRE_SMOL();
  const std::string s("a\0b\0\0c", 6);
  const auto ids = smol->Encode(s);
  EXPECT_EQ(smol->Decode(ids), s);
  EXPECT_EQ(ids, Concat({smol->Encode("a"), smol->Encode(std::string(1, '\0')), smol->Encode("b"),
                         smol->Encode(std::string(2, '\0')), smol->Encode("c")}));
}

TEST(Tokenizer, ByteSymbolsMissingFromVocabAreDropped) {
  LOCKSTEP_REQUIRE_SMOL();
  // The real vocab lacks the symbol of byte 0x04 (contrary to §3.1.5.b);
  // with unk_token null the crate drops it.
  ASSERT_FALSE(smol->TokenToId(ByteToSymbol(0x04)).has_value());
  EXPECT_TRUE(smol->Encode("\x04").empty());
  EXPECT_EQ(smol->Encode("a\x04!"), Concat({smol->Encode("a"), smol->Encode("!")}));
}

TEST(Tokenizer, DecodeHandlesUnknownIdsAndPartialCharacters) {
  LOCKSTEP_REQUIRE_SMOL();
  const auto once = smol->Encode("Once");
  EXPECT_EQ(smol->Decode(Concat({once, {4000000000u, smol->vocab_size()}, smol->Encode(" upon")})),
            "Once upon");
  // "æ" is the symbol of byte 0xE6: alone it is an incomplete UTF-8 lead.
  const auto lead = smol->TokenToId("\xC3\xA6");
  ASSERT_TRUE(lead.has_value());
  EXPECT_EQ(smol->Decode(std::vector<uint32_t>{*lead}), "\xEF\xBF\xBD");
  // Splitting a character's bytes across tokens still decodes as a whole.
  const auto euro = smol->Encode("\xE2\x82\xAC");
  EXPECT_EQ(smol->Decode(euro), "\xE2\x82\xAC");
}

// Random byte strings: never crash, ids in range, decode always valid
// UTF-8, and the round trip is exact for valid UTF-8 whose bytes all have
// vocab symbols.
TEST(Tokenizer, SeededRandomBytesProperty) {
  LOCKSTEP_REQUIRE_SMOL();
  bool byte_known[256];
  for (int b = 0; b < 256; ++b) byte_known[b] = smol->TokenToId(ByteToSymbol(b)).has_value();
  std::mt19937_64 rng(20261129);
  const std::vector<std::string> alphabet = {
      "a", "Z", " ", "  ", "\n", "\t", "'s", "'", "7", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
      "<|im_end|>", "\xCC\x81", "\xE3\x80\x80", std::string(1, '\0'), "\xFF", "\xE2\x82", "\x80", "."};
  std::set<std::string> distinct;
  int round_trips = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s;
    const int len = static_cast<int>(rng() % 24);
    for (int i = 0; i < len; ++i) {
      if (rng() % 3 == 0) s.push_back(static_cast<char>(rng() % 256));
      else s += alphabet[rng() % alphabet.size()];
    }
    distinct.insert(s);
    const auto ids = smol->Encode(s);
    for (uint32_t id : ids) ASSERT_LT(id, smol->vocab_size());
    const std::string back = smol->Decode(ids);
    ASSERT_TRUE(IsValidUtf8(back));
    bool all_known = true;
    for (unsigned char c : s) all_known = all_known && byte_known[c];
    if (IsValidUtf8(s) && all_known) {
      ASSERT_EQ(back, s);
      ++round_trips;
    }
  }
  EXPECT_GT(distinct.size(), 1800u);  // the generator really varies
  EXPECT_GT(round_trips, 100);
}

TEST(Tokenizer, RoundTripOnValidText) {
  LOCKSTEP_REQUIRE_SMOL();
  for (const std::string s : {"Hello, world!", "  x  ", "\r\n\r\n", "café ☕ 3.14", "a'b'c''d",
                              "   ", "tab\tsep\tvalues\n", "<|endoftext|>"}) {
    EXPECT_EQ(smol->Decode(smol->Encode(s)), s);
  }
}

TEST(Tokenizer, ConcurrentEncodeMatchesSerial) {
  LOCKSTEP_REQUIRE_SMOL();
  const std::string text = "The quick brown fox jumps over the lazy dog 1234. ";
  std::string big;
  for (int i = 0; i < 200; ++i) big += text;
  const auto want = smol->Encode(big);
  std::vector<std::vector<uint32_t>> got(2);
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&got, &big, smol, t] {
      for (int i = 0; i < 5; ++i) got[t] = smol->Encode(big);
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(got[0], want);
  EXPECT_EQ(got[1], want);
  const Tokenizer copy = *smol;  // copies share the tables
  EXPECT_EQ(copy.Encode(big), want);
}

}  // namespace
}  // namespace lockstep
