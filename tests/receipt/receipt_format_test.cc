// The receipt format: canonical bytes, signatures over them, and parsing
// that refuses malformed or inconsistent receipts with the member named.
#include "receipt/receipt.h"

#include <gtest/gtest.h>

#include <functional>

namespace lockstep::receipt {
namespace {

using nlohmann::json;

DecodeResult SampleResult() {
  DecodeResult d;
  d.prompt = {1, 2, 3};
  d.generated = {7, 8};
  d.logits_sha256 = {Sha256(std::string_view("step0")), Sha256(std::string_view("step1"))};
  d.cis2_ref = Sha256(std::string_view("chain"));
  d.argmax_digest = ArgmaxDigest(d.prompt, d.generated);
  return d;
}

json SampleReceipt() {
  static const DecodeResult d = SampleResult();
  ReceiptInputs in;
  in.result = &d;
  in.seed.weights_sha256 = Sha256(std::string_view("w"));
  in.window = 4;
  in.evictions = {EvictSpec{0, 1, 1}};
  in.generated_text = std::string("caf\xc3\xa9 \xff");  // one invalid byte
  in.timings = {{"decode_ms_per_token_sharded", 1.25}};
  return BuildReceipt(in);
}

TEST(ReceiptFormat, KeepsTheLegacyKeysAndRecordsEachStep) {
  const json j = SampleReceipt();
  for (const char* k : {"prompt_token_ids", "generated_token_ids", "table_digest",
                        "inv_freq_table_digest", "argmax_digest", "cis2_ref", "weights_sha256",
                        "tokenizer_sha256", "config_sha256"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["receipt_version"], 1);
  EXPECT_EQ(j["steps"].size(), 2u);
  EXPECT_EQ(j["steps"][1]["token"], 8);
  EXPECT_EQ(j["steps"][1]["logits_sha256"], ToHex(Sha256(std::string_view("step1"))));
  EXPECT_EQ(j["options"]["window"], 4);
  EXPECT_EQ(j["options"]["evictions"][0], "0:1@1");
  EXPECT_EQ(j["plan"], "monolithic");
  auto p = ParseReceipt(j);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->generated, (std::vector<uint32_t>{7, 8}));
  EXPECT_EQ(p->window, 4);
  ASSERT_EQ(p->evictions.size(), 1u);
  EXPECT_EQ(p->evictions[0].step, 1u);
}

TEST(ReceiptFormat, CanonicalBytesAreSortedCompactAsciiAndSurviveReformatting) {
  json j = SampleReceipt();
  const std::string c = CanonicalBytes(j);
  EXPECT_EQ(c.find("\": "), std::string::npos);
  EXPECT_EQ(c.find(", \""), std::string::npos);
  EXPECT_EQ(c.find('\n'), std::string::npos);
  EXPECT_LT(c.find("\"argmax_digest\""), c.find("\"cis2_ref\""));
  EXPECT_LT(c.find("\"cis2_ref\""), c.find("\"weights_sha256\""));
  for (unsigned char ch : c) EXPECT_LT(ch, 0x80);
  EXPECT_NE(c.find("caf\\u00e9 \\ufffd"), std::string::npos) << c;
  // Pretty-printed, re-parsed: the same canonical bytes.
  const json again = json::parse(j.dump(2));
  EXPECT_EQ(CanonicalBytes(again), c);
  // The signature member is not part of them.
  j["signature"] = "anything";
  EXPECT_EQ(CanonicalBytes(j), c);
}

TEST(ReceiptFormat, SignaturesCatchEveryChangeAndAnotherKey) {
  auto a = keys::GenerateIdentity();
  auto b = keys::GenerateIdentity();
  ASSERT_TRUE(a.ok() && b.ok());
  json j = SampleReceipt();
  EXPECT_EQ(CheckSignature(j, std::nullopt).kind(), ErrorKind::kMismatch);  // not signed
  ASSERT_TRUE(SignReceipt(&j, *a).ok());
  EXPECT_TRUE(CheckSignature(j, std::nullopt).ok());
  EXPECT_TRUE(CheckSignature(j, a->pub.sign_public).ok());
  EXPECT_TRUE(CheckSignature(json::parse(j.dump(4)), a->pub.sign_public).ok());

  const Status other = CheckSignature(j, b->pub.sign_public);
  EXPECT_EQ(other.kind(), ErrorKind::kMismatch);
  EXPECT_NE(other.message().find("another key"), std::string::npos) << other.message();

  for (const char* field : {"cis2_ref", "argmax_digest", "timings"}) {
    json t = j;
    t[field] = field == std::string("timings") ? json{{"x", 1}} : json(std::string(64, '0'));
    const Status st = CheckSignature(t, a->pub.sign_public);
    EXPECT_EQ(st.kind(), ErrorKind::kMismatch) << field;
    EXPECT_NE(st.message().find("does not verify"), std::string::npos) << st.message();
  }
  json t = j;
  t["steps"][0]["token"] = 9;
  EXPECT_FALSE(CheckSignature(t, a->pub.sign_public).ok());

  // Re-signed by another key: valid for that key, refused for the trusted one.
  json resigned = t;
  ASSERT_TRUE(SignReceipt(&resigned, *b).ok());
  EXPECT_TRUE(CheckSignature(resigned, std::nullopt).ok());
  EXPECT_NE(CheckSignature(resigned, a->pub.sign_public).message().find("another key"),
            std::string::npos);

  json garbled = j;
  garbled["signature"]["value"] = "zz";
  EXPECT_EQ(CheckSignature(garbled, a->pub.sign_public).kind(), ErrorKind::kInvalid);
}

TEST(ReceiptFormat, MalformedReceiptsNameTheMember) {
  struct Case {
    std::function<void(json&)> edit;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {[](json& j) { j.erase("cis2_ref"); }, "missing \"cis2_ref\""},
      {[](json& j) { j["receipt_version"] = 2; }, "receipt_version"},
      {[](json& j) { j["argmax_digest"] = "abc"; }, "argmax_digest: expected 64 hex"},
      {[](json& j) { j["prompt_token_ids"] = json::array(); }, "prompt_token_ids: empty"},
      {[](json& j) { j["prompt_token_ids"][0] = -1; }, "prompt_token_ids[0]"},
      {[](json& j) { j["prompt_token_ids"][0] = 1ull << 40; }, "prompt_token_ids[0]"},
      {[](json& j) { j["generated_token_ids"] = "7,8"; }, "generated_token_ids: expected an array"},
      {[](json& j) { j["steps"].erase(1); }, "steps removed or added"},
      {[](json& j) { j["steps"][0]["token"] = 9; }, "steps[0].token 9 disagrees"},
      {[](json& j) { j["steps"][1].erase("logits_sha256"); }, "steps[1]: missing \"logits_sha256\""},
      {[](json& j) { j["options"]["gen"] = 3; }, "options.gen is 3"},
      {[](json& j) { j["options"]["window"] = -2; }, "options.window"},
      {[](json& j) { j["options"]["evictions"][0] = "0:0@1"; }, "COUNT must be at least 1"},
      {[](json& j) { j["options"]["sampling"] = "top-k"; }, "sampling"},
      {[](json& j) { j["workers"] = json::array({{{"endpoint", 5}}}); }, "workers[0]"},
      {[](json& j) { j = json::array(); }, "not a JSON object"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    json j = SampleReceipt();
    cases[i].edit(j);
    auto p = ParseReceipt(j);
    ASSERT_FALSE(p.ok()) << "case " << i;
    EXPECT_NE(p.status().message().find(cases[i].expect), std::string::npos)
        << "case " << i << ": " << p.status().message();
  }
}

TEST(ReceiptFormat, FirstDivergenceNamesStepAndBothValues) {
  const json j = SampleReceipt();
  auto p = ParseReceipt(j);
  ASSERT_TRUE(p.ok());
  DecodeResult same = SampleResult();
  EXPECT_FALSE(FirstDivergence(*p, same).has_value());

  DecodeResult other = same;
  other.logits_sha256[1] = Sha256(std::string_view("different"));
  auto d = FirstDivergence(*p, other);
  ASSERT_TRUE(d.has_value());
  EXPECT_NE(d->what.find("step 1: logits_sha256 receipt " + ToHex(same.logits_sha256[1]) +
                         " recomputed " + ToHex(other.logits_sha256[1])),
            std::string::npos)
      << d->what;

  other = same;
  other.generated[0] = 5;
  d = FirstDivergence(*p, other);
  ASSERT_TRUE(d.has_value());
  EXPECT_NE(d->what.find("step 0: token receipt 7 recomputed 5"), std::string::npos) << d->what;

  other = same;
  other.cis2_ref = Sha256(std::string_view("x"));
  d = FirstDivergence(*p, other);
  ASSERT_TRUE(d.has_value());
  EXPECT_NE(d->what.find("cis2_ref"), std::string::npos);
}

}  // namespace
}  // namespace lockstep::receipt
