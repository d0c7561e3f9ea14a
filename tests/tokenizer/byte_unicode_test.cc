#include "engine/tokenizer/byte_unicode.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

#include "engine/tokenizer/utf8.h"

namespace lockstep {
namespace {

TEST(ByteUnicode, IsTheGpt2Bijection) {
  std::set<uint32_t> seen;
  int self_mapped = 0;
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = ByteToCodepoint(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second) << b;
    EXPECT_EQ(CodepointToByte(cp), b);
    if (cp == static_cast<uint32_t>(b)) ++self_mapped;
    else EXPECT_GE(cp, 256u);
  }
  EXPECT_EQ(self_mapped, 188);
  EXPECT_EQ(*seen.rbegin(), 323u);
  EXPECT_EQ(ByteToCodepoint(0x20), 0x120u);  // Ġ (§3.1.5.a)
  EXPECT_EQ(ByteToCodepoint(0x0A), 0x10Au);  // Ċ
  EXPECT_EQ(ByteToCodepoint(0x00), 0x100u);
  EXPECT_EQ(ByteToCodepoint(0x7F), 0x100u + 33);  // after 0x00-0x20
  EXPECT_EQ(ByteToCodepoint(0xAD), 0x143u);       // the last one
  EXPECT_EQ(ByteToSymbol(0x20), "\xC4\xA0");
  EXPECT_EQ(ByteToSymbol('A'), "A");
  EXPECT_EQ(CodepointToByte('a'), 'a');
  EXPECT_EQ(CodepointToByte(0x20), -1);   // space itself is not in the alphabet
  EXPECT_EQ(CodepointToByte(0x144), -1);
  EXPECT_EQ(CodepointToByte(0x1F600), -1);
}

TEST(Utf8, ValidityAndLossyReplacement) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8(std::string("a\0b", 3)));
  EXPECT_TRUE(IsValidUtf8("\xF4\x8F\xBF\xBF"));   // U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xC1\xBF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xE0\x9F\xBF"));      // overlong 3-byte
  // Examples of Rust's String::from_utf8_lossy documentation and the
  // Unicode "maximal subpart" practice it follows.
  EXPECT_EQ(LossyUtf8("Hello \xF0\x90\x80World"), "Hello " + fffd + "World");
  EXPECT_EQ(LossyUtf8("\xF1\x80\x80"), fffd);
  EXPECT_EQ(LossyUtf8("\xE1\x80" "A"), fffd + "A");
  EXPECT_EQ(LossyUtf8("\xC0\xAF"), fffd + fffd);
  EXPECT_EQ(LossyUtf8("\xED\xA0\x80"), fffd + fffd + fffd);
  EXPECT_EQ(LossyUtf8("\x80\xBF"), fffd + fffd);
  EXPECT_EQ(LossyUtf8("ok"), "ok");
  std::string s;
  AppendUtf8(0x1F600, &s);
  AppendUtf8(0x41, &s);
  AppendUtf8(0x7FF, &s);
  EXPECT_EQ(s, "\xF0\x9F\x98\x80" "A" "\xDF\xBF");
}

}  // namespace
}  // namespace lockstep
