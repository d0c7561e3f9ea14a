// `lockstep run --receipt`, `--json`, `--sign-key` and `lockstep verify`
// end to end on a small seeded model: clean receipts verify (recomputed
// monolithically and on loopback workers); every kind of tampering, a
// wrong model and a wrong signer are reported as such with exit code 1.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli_runner.h"
#include "receipt/receipt.h"

namespace lockstep::receipt {
namespace {

using lockstep::testing::LastLineJson;
using lockstep::testing::MakeTempDir;
using lockstep::testing::ReadJsonFile;
using lockstep::testing::RunCli;
using nlohmann::json;

void WriteJson(const std::string& path, const json& j) {
  std::ofstream out(path);
  out << j.dump(2);
}

class VerifyCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("verify"));
    for (const auto& [name, seed] : {std::pair{"m", "3"}, std::pair{"other", "4"}}) {
      auto r = RunCli({"make-model", *dir_ + "/" + name, "--seed", seed, "--hidden", "64",
                       "--layers", "3", "--heads", "4", "--kv-heads", "2", "--inter", "96",
                       "--vocab", "300", "--theta", "10000"});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    for (const char* k : {"/a.key", "/b.key"}) {
      auto r = RunCli({"keygen", *dir_ + k});
      ASSERT_EQ(r.exit_code, 0) << r.err;
    }
    // One signed receipt of a sharded run with a window and an eviction.
    auto r = RunCli({"run", "--model", Model(), "--ids", "5,9,2,7", "--gen", "6", "--workers",
                     "2", "--window", "5", "--evict", "1:1@2", "--json", "--receipt",
                     *dir_ + "/signed.json", "--sign-key", *dir_ + "/a.key"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    *stdout_json_ = LastLineJson(r.out);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  static std::string Model() { return *dir_ + "/m"; }
  static std::string Signed() { return *dir_ + "/signed.json"; }
  // Verifies an edited copy of the signed receipt (signature dropped).
  static testing::CliOutput VerifyEdited(const std::string& tag, const std::function<void(json&)>& edit) {
    json j = ReadJsonFile(Signed());
    j.erase("signature");
    edit(j);
    const std::string p = *dir_ + "/" + tag + ".json";
    WriteJson(p, j);
    return RunCli({"verify", p, "--model", Model()});
  }

  static std::string* dir_;
  static json* stdout_json_;
};
std::string* VerifyCli::dir_ = nullptr;
json* VerifyCli::stdout_json_ = new json;

TEST_F(VerifyCli, JsonOutputAndReceiptFileAreTheSameReceipt) {
  const json file = ReadJsonFile(Signed());
  EXPECT_EQ(file, *stdout_json_);
  EXPECT_EQ(file["plan"], "0:2,2:3");
  EXPECT_EQ(file["workers"].size(), 2u);
  EXPECT_EQ(file["options"]["window"], 5);
  EXPECT_EQ(file["options"]["evictions"][0], "1:1@2");
  EXPECT_EQ(file["steps"].size(), 6u);
}

TEST_F(VerifyCli, SignedShardedReceiptVerifiesMonolithicallyAndOnWorkers) {
  auto mono = RunCli({"verify", Signed(), "--model", Model(), "--trust", *dir_ + "/a.key.pub"});
  EXPECT_EQ(mono.exit_code, 0) << mono.out << mono.err;
  EXPECT_NE(mono.out.find("VERIFIED"), std::string::npos) << mono.out;
  EXPECT_NE(mono.out.find("monolithic"), std::string::npos) << mono.out;
  auto sharded = RunCli({"verify", Signed(), "--model", Model(), "--workers", "3"});
  EXPECT_EQ(sharded.exit_code, 0) << sharded.out << sharded.err;
  EXPECT_NE(sharded.out.find("3 loopback workers"), std::string::npos) << sharded.out;
  EXPECT_NE(sharded.out.find("VERIFIED"), std::string::npos);
}

TEST_F(VerifyCli, MonolithicReceiptVerifiesSharded) {
  const std::string p = *dir_ + "/mono.json";
  auto r = RunCli({"run", "--model", Model(), "--ids", "3,1", "--gen", "4", "--receipt", p});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("CIS2_REF"), std::string::npos);  // human report still printed
  auto v = RunCli({"verify", p, "--model", Model(), "--workers", "2"});
  EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
}

TEST_F(VerifyCli, WrongSignerTamperingAndMissingSignatureAreReported) {
  auto other = RunCli({"verify", Signed(), "--model", Model(), "--trust", *dir_ + "/b.key.pub"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.out.find("signed by another key"), std::string::npos) << other.out << other.err;

  json j = ReadJsonFile(Signed());
  j["generated_token_ids"][0] = 1;
  j["steps"][0]["token"] = 1;
  WriteJson(*dir_ + "/tampered.json", j);
  auto tampered = RunCli({"verify", *dir_ + "/tampered.json", "--model", Model(), "--trust",
                          *dir_ + "/a.key.pub"});
  EXPECT_EQ(tampered.exit_code, 1);
  EXPECT_NE(tampered.out.find("does not verify"), std::string::npos) << tampered.out;
  // Without --trust the embedded signature is still checked.
  auto untrusted = RunCli({"verify", *dir_ + "/tampered.json", "--model", Model()});
  EXPECT_EQ(untrusted.exit_code, 1);
  EXPECT_NE(untrusted.out.find("does not verify"), std::string::npos) << untrusted.out;

  j.erase("signature");
  WriteJson(*dir_ + "/unsigned.json", j);
  auto unsigned_ = RunCli({"verify", *dir_ + "/unsigned.json", "--model", Model(), "--trust",
                           *dir_ + "/a.key.pub"});
  EXPECT_EQ(unsigned_.exit_code, 1);
  EXPECT_NE(unsigned_.out.find("not signed"), std::string::npos) << unsigned_.out;
}

TEST_F(VerifyCli, ChangedTokensDigestsAndRemovedStepsAreCaught) {
  const json orig = ReadJsonFile(Signed());
  const uint32_t t2 = orig["steps"][2]["token"].get<uint32_t>();
  auto token = VerifyEdited("token", [&](json& j) {
    j["generated_token_ids"][2] = t2 + 1;
    j["steps"][2]["token"] = t2 + 1;
  });
  EXPECT_EQ(token.exit_code, 1);
  EXPECT_NE(token.out.find("DIFFERS: step 2: token receipt " + std::to_string(t2 + 1) +
                           " recomputed " + std::to_string(t2)),
            std::string::npos)
      << token.out << token.err;

  const std::string h3 = orig["steps"][3]["logits_sha256"];
  auto logits = VerifyEdited("logits", [&](json& j) { j["steps"][3]["logits_sha256"] = std::string(64, 'a'); });
  EXPECT_EQ(logits.exit_code, 1);
  EXPECT_NE(logits.out.find("step 3: logits_sha256 receipt " + std::string(64, 'a') +
                            " recomputed " + h3),
            std::string::npos)
      << logits.out;

  auto cis2 = VerifyEdited("cis2", [&](json& j) { j["cis2_ref"] = std::string(64, 'b'); });
  EXPECT_EQ(cis2.exit_code, 1);
  EXPECT_NE(cis2.out.find("DIFFERS: cis2_ref receipt " + std::string(64, 'b')), std::string::npos)
      << cis2.out;

  auto argmax = VerifyEdited("argmax", [&](json& j) { j["argmax_digest"] = std::string(64, 'c'); });
  EXPECT_EQ(argmax.exit_code, 1);
  EXPECT_NE(argmax.out.find("DIFFERS: argmax_digest"), std::string::npos) << argmax.out;

  // A step removed (and the counts made consistent): the chain no longer matches.
  auto removed = VerifyEdited("removed", [&](json& j) {
    j["steps"].erase(5);
    j["generated_token_ids"].erase(5);
    j["options"]["gen"] = 5;
  });
  EXPECT_EQ(removed.exit_code, 1);
  EXPECT_NE(removed.out.find("DIFFERS"), std::string::npos) << removed.out << removed.err;

  // A step removed inconsistently: refused before any work.
  auto cut = VerifyEdited("cut", [&](json& j) { j["steps"].erase(5); });
  EXPECT_EQ(cut.exit_code, 1);
  EXPECT_NE(cut.err.find("steps removed or added"), std::string::npos) << cut.err;

  // A different eviction changes the logits from step 3 on.
  auto option = VerifyEdited("option", [&](json& j) { j["options"]["evictions"][0] = "1:2@2"; });
  EXPECT_EQ(option.exit_code, 1);
  EXPECT_NE(option.out.find("DIFFERS: step 3"), std::string::npos) << option.out;
}

// generated_text is recomputed from the tokens, so a changed text is a
// difference; plan and workers cannot be recomputed, so without a trusted
// signature verify says they are not verified.
TEST_F(VerifyCli, GeneratedTextIsRecomputedAndPlanAndWorkersAreMarkedUnverified) {
  ASSERT_TRUE(ReadJsonFile(Signed()).contains("generated_text"));
  auto text = VerifyEdited("text", [](json& j) { j["generated_text"] = "the system approves"; });
  EXPECT_EQ(text.exit_code, 1) << text.out << text.err;
  EXPECT_NE(text.out.find("DIFFERS: generated_text is not the text of the generated tokens: "
                          "receipt \"the system approves\" recomputed "),
            std::string::npos)
      << text.out;

  auto claims = VerifyEdited("claims", [](json& j) {
    j["plan"] = "0:1,1:3";
    j["workers"][0]["endpoint"] = "tcp://trusted.example:5555";
  });
  EXPECT_EQ(claims.exit_code, 0) << claims.out << claims.err;
  EXPECT_NE(claims.out.find("generated_text        = the text of the recomputed tokens"),
            std::string::npos) << claims.out;
  EXPECT_NE(claims.out.find("plan, workers         = NOT VERIFIED"), std::string::npos) << claims.out;

  auto trusted = RunCli({"verify", Signed(), "--model", Model(), "--trust", *dir_ + "/a.key.pub"});
  EXPECT_EQ(trusted.exit_code, 0) << trusted.out << trusted.err;
  EXPECT_NE(trusted.out.find("plan, workers         = as the trusted signer states them"),
            std::string::npos) << trusted.out;
}

// Receipts are read by the strict reader: 60,000 nested levels (120 KB)
// beside a signature (whose check copied and serialised the tree
// recursively, SIGSEGV) are an error, not a crash, and a member given
// twice is refused by name.
TEST_F(VerifyCli, DeepNestingAndRepeatedMembersAreRefused) {
  const std::string deep = *dir_ + "/deep.json";
  std::ofstream(deep) << "{\"signature\": {\"algorithm\": \"ed25519\", \"public_key\": \""
                      << std::string(64, '0') << "\", \"value\": \"" << std::string(128, '0')
                      << "\"}, \"x\": " << std::string(60000, '[') << std::string(60000, ']') << "}";
  auto nested = RunCli({"verify", deep, "--model", Model()});
  EXPECT_EQ(nested.exit_code, 1) << nested.err;
  EXPECT_NE(nested.err.find("deep.json: JSON nested deeper than 64 levels"), std::string::npos)
      << nested.err;

  std::string text = ReadJsonFile(Signed()).dump();
  text.insert(1, "\"plan\":\"0:3\",");
  const std::string twice = *dir_ + "/twice.json";
  std::ofstream(twice) << text;
  auto dup = RunCli({"verify", twice, "--model", Model()});
  EXPECT_EQ(dup.exit_code, 1) << dup.out;
  EXPECT_NE(dup.err.find("duplicate JSON key \"plan\""), std::string::npos) << dup.err;
}

TEST_F(VerifyCli, WrongModelIsNamedBeforeAnyRecompute) {
  auto r = RunCli({"verify", Signed(), "--model", *dir_ + "/other"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("DIFFERS: wrong model"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("model.safetensors: sha256 expected"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("recomputed"), std::string::npos) << r.out;

  auto missing = RunCli({"verify", *dir_ + "/nope.json", "--model", Model()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.json"), std::string::npos);

  std::ofstream(*dir_ + "/junk.json") << "{not json";
  auto junk = RunCli({"verify", *dir_ + "/junk.json", "--model", Model()});
  EXPECT_EQ(junk.exit_code, 1);
  EXPECT_NE(junk.err.find("not valid JSON"), std::string::npos) << junk.err;

  auto huge = VerifyEdited("huge", [](json& j) { j["options"]["gen"] = 4000000000u; });
  EXPECT_EQ(huge.exit_code, 1);
}

TEST_F(VerifyCli, SignKeyErrorsComeBeforeTheDecode) {
  auto r = RunCli({"run", "--model", Model(), "--ids", "1", "--gen", "2", "--sign-key",
                   *dir_ + "/a.key.pub", "--json"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("a.key.pub"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace lockstep::receipt
