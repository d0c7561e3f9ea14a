// End-to-end conformance: `lockstep run ... --json` against values computed
// by an independent implementation of CIS-2 (../shared/fixtures/conformance)
// and, when the real weights are present, the spec's §13.1 test vector.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "tests/fixture_absent.h"

namespace lockstep::testing {
namespace {

TEST(Conformance, EveryVectorCaseMatchesTheIndependentImplementation) {
  ExpectConformanceVectors({});
}

// The checker itself: a case with an empty (or missing) expectation, or
// expecting a key the output lacks, fails instead of passing silently.
TEST(Conformance, ACaseThatExpectsNothingFails) {
  static const nlohmann::json got = {{"cis2_ref", "ab"}};
  static const ConformanceCase empty{"empty", {}, nlohmann::json::object()};
  static const ConformanceCase missing{"missing", {}, nullptr};
  static const ConformanceCase absent_key{"absent", {}, {{"argmax_digest", "cd"}}};
  static const ConformanceCase wrong{"wrong", {}, {{"cis2_ref", "cd"}}};
  EXPECT_FATAL_FAILURE(ExpectConformanceCase(empty, got), "would assert nothing");
  EXPECT_FATAL_FAILURE(ExpectConformanceCase(missing, got), "would assert nothing");
  EXPECT_FATAL_FAILURE(ExpectConformanceCase(absent_key, got), "has no argmax_digest");
  EXPECT_NONFATAL_FAILURE(ExpectConformanceCase(wrong, got), "key cis2_ref");
}

// §13.1, run only where LOCKSTEP_SMOLLM2_DIR names a folder with the real files.
TEST(Conformance, SmolLM2RealWeightsSpec131) {
  const char* dir = std::getenv("LOCKSTEP_SMOLLM2_DIR");
  if (dir == nullptr || *dir == '\0') {
    GTEST_SKIP() << "LOCKSTEP_SMOLLM2_DIR is not set (real SmolLM2-135M weights are not here)";
  }
  const CliOutput o = RunCli({"run", "--model", dir, "--prompt", "Once upon a time", "--gen", "16",
                              "--expect", "smollm2-135m", "--json"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const nlohmann::json got = LastLineJson(o.out);
  EXPECT_EQ(got["prompt_token_ids"], nlohmann::json({6403, 1980, 253, 655}));
  EXPECT_EQ(got["generated_token_ids"],
            nlohmann::json({28, 665, 436, 253, 1838, 8180, 3365, 14176, 30, 2306, 4161, 281, 253,
                            2066, 2291, 351}));
  EXPECT_EQ(got["table_digest"], "23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d");
  EXPECT_EQ(got["inv_freq_table_digest"],
            "da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12");
  EXPECT_EQ(got["argmax_digest"], "0b9c8f3ac90d0b9cd5f1719ac327dca1fc639fd87468305fccebbe3d56f67aff");
  EXPECT_EQ(got["cis2_ref"], "d82743059d1db929e710236fe4ec37f89e6f932524801345a006980f7c3cc9df");
}

TEST(Conformance, HumanReportEndsWithTheSpecLine) {
  const std::string model = SharedPath("fixtures/conformance/tiny-llama");
  if (model.empty()) LOCKSTEP_FIXTURE_ABSENT() << "shared conformance fixtures are absent";
  const CliOutput o = RunCli({"run", "--model", model, "--ids", "1,2,3,4,5", "--gen", "16"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("CIS2_REF digest=a4743606c4d8fc9f22db080718cda88ca136eebee4e89b1ed7d33d70ff8eafa6"
                       " prompt_idx=0 prompt_toks=5 gen_toks=16 dtype=fp32\n"),
            std::string::npos)
      << o.out;
}

}  // namespace
}  // namespace lockstep::testing
