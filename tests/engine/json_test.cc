// The one JSON reader (base/json.h): nesting bounded before the parser runs,
// a repeated key refused by name at any depth, NUL refused, numbers as
// CIS-2 §2.3 reads config floats (one rounding to f64, then one to f32).
#include "base/json.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <string>
#include <vector>

namespace lockstep {
namespace {

Result<nlohmann::json> Parse(const std::string& text) {
  return ParseJsonStrict(text, "t.json", ErrorKind::kCorrupt);
}

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

TEST(StrictJson, NestingUpToTheLimitParsesAndOneMoreDoesNot) {
  EXPECT_TRUE(Parse(Nested(kMaxJsonDepth)).ok());
  const auto deeper = Parse(Nested(kMaxJsonDepth + 1));
  ASSERT_FALSE(deeper.ok());
  EXPECT_EQ(deeper.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(deeper.status().message().find("t.json: JSON nested deeper than 64"), std::string::npos);
  // 60,000 levels (120 KB): refused by the scan, no recursion anywhere.
  EXPECT_FALSE(Parse(Nested(60000)).ok());
  std::string objects;
  for (int i = 0; i < 60000; ++i) objects += "{\"a\":";
  EXPECT_FALSE(Parse(objects + "1" + std::string(60000, '}')).ok());
  // Brackets inside strings are text, not nesting.
  EXPECT_TRUE(Parse("[\"" + Nested(200) + "\\\"[[[\"]").ok());
}

TEST(StrictJson, ARepeatedKeyIsRefusedByNameAtAnyDepth) {
  for (const char* text : {R"({"a": 1, "a": 2})", R"({"x": {"b": [1, {"a": 1, "a": 1}]}})",
                           R"([{"a": 1}, {"q": 0, "a": {}, "a": null}])"}) {
    const auto r = Parse(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find("duplicate JSON key \"a\""), std::string::npos) << text;
  }
  // The same key in sibling objects is no repetition.
  EXPECT_TRUE(Parse(R"([{"a": 1}, {"a": 2}, {"b": {"a": 3}, "a": 4}])").ok());
}

TEST(StrictJson, OneCompleteValueWithoutNul) {
  EXPECT_TRUE(Parse(" {\"a\": [1, 2]}\n").ok());
  const std::vector<std::string> bad = {"", "{", "{} {}", "[1,]", std::string("{\"a\": 1}\0", 9),
                                        std::string("[\"a\0b\"]", 7), "{'a': 1}"};
  for (const std::string& text : bad) {
    EXPECT_FALSE(Parse(text).ok()) << text;
  }
}

TEST(StrictJson, NumbersRoundOnceToDoubleAndIntegersStayExact) {
  const auto eps = Parse(R"({"rms_norm_eps": 1e-05, "theta": 500000.0, "big": 18446744073709551615,
                             "neg": -9223372036854775808})");
  ASSERT_TRUE(eps.ok()) << eps.status().ToString();
  const double d = (*eps)["rms_norm_eps"].get<double>();
  EXPECT_EQ(std::bit_cast<uint64_t>(d), std::bit_cast<uint64_t>(1.0e-5));
  EXPECT_EQ(std::bit_cast<uint32_t>(static_cast<float>(d)), 0x3727C5ACu);  // §2.3's EPS_F32
  EXPECT_EQ((*eps)["theta"].get<double>(), 500000.0);
  EXPECT_EQ((*eps)["big"].get<uint64_t>(), UINT64_MAX);
  EXPECT_EQ((*eps)["neg"].get<int64_t>(), INT64_MIN);
  EXPECT_FALSE(Parse("[1e400]").ok());  // beyond the double range
}

}  // namespace
}  // namespace lockstep
