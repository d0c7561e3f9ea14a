// `lockstep make-model` + `lockstep run` over several shapes (GQA groups
// 1-3, with and without q/k/v biases, tied and untied heads): the same
// digests in two separate processes, and a different seed changes them.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace lockstep::testing {
namespace {

struct Shape {
  const char* name;
  std::vector<std::string> flags;
};

nlohmann::json RunJson(const std::string& dir, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", "--model", dir, "--ids", "3,1,4,1,5", "--gen", "6", "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  const CliOutput o = RunCli(args);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  return nlohmann::json::parse(o.out.empty() ? "{}" : o.out);
}

std::string MakeModel(const std::string& root, const Shape& s, int seed) {
  const std::string dir = root + "/" + s.name + "-" + std::to_string(seed);
  std::vector<std::string> args = {"make-model", dir, "--seed", std::to_string(seed)};
  args.insert(args.end(), s.flags.begin(), s.flags.end());
  const CliOutput o = RunCli(args);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  return dir;
}

class ShapesTest : public ::testing::TestWithParam<Shape> {};

TEST_P(ShapesTest, SameDigestsAcrossProcessesAndSeedsDiffer) {
  const std::string root = MakeTempDir("shapes");
  const Shape& s = GetParam();
  const std::string a = MakeModel(root, s, 7);
  const nlohmann::json first = RunJson(a, {});
  const nlohmann::json second = RunJson(a, {});
  ASSERT_TRUE(first.contains("cis2_ref"));
  EXPECT_EQ(first, second);
  EXPECT_EQ(first["generated_token_ids"].size(), 6u);
  const nlohmann::json other = RunJson(MakeModel(root, s, 8), {});
  EXPECT_NE(first["weights_sha256"], other["weights_sha256"]);
  EXPECT_NE(first["cis2_ref"], other["cis2_ref"]);
  std::filesystem::remove_all(root);
}

const std::vector<std::string> kBase = {"--hidden", "48", "--layers", "3", "--inter", "96",
                                        "--vocab", "300"};
std::vector<std::string> With(std::vector<std::string> extra) {
  std::vector<std::string> v = kBase;
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

INSTANTIATE_TEST_SUITE_P(
    Synthetic, ShapesTest,
    ::testing::Values(Shape{"group1", With({"--heads", "4", "--kv-heads", "4"})},
                      Shape{"group2", With({"--heads", "4", "--kv-heads", "2"})},
                      Shape{"group3", With({"--heads", "6", "--kv-heads", "2"})},
                      Shape{"bias", With({"--heads", "4", "--kv-heads", "2", "--bias"})},
                      Shape{"untied", With({"--heads", "6", "--kv-heads", "2", "--untied"})},
                      Shape{"bias_untied_theta1e6",
                            With({"--heads", "3", "--kv-heads", "1", "--bias", "--untied",
                                  "--theta", "1000000"})}),
    [](const ::testing::TestParamInfo<Shape>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace lockstep::testing
