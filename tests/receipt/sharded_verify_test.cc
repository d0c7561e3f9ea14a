// `lockstep verify --workers 2`, whose teacher forcing runs as multi-row
// steps on the workers (docs/wire_protocol.md, "Multi-row steps"), reports
// what monolithic verify reports, line for line: for greedy, sampled,
// windowed and evicting, and traced receipts, clean and tampered (a token
// in the middle, the first token, a token outside the vocabulary, a logits
// digest, a layer digest): VERIFIED, or the same first differing step.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "cli_runner.h"

namespace lockstep::receipt {
namespace {

using lockstep::testing::MakeTempDir;
using lockstep::testing::RunCli;
using nlohmann::json;

// The lines of verify's report that state its verdict (not its timings).
std::string Verdict(const lockstep::testing::CliOutput& out) {
  std::istringstream in(out.out);
  std::string line, verdict = "exit " + std::to_string(out.exit_code) + "\n";
  while (std::getline(in, line)) {
    if (line.rfind("VERIFIED", 0) == 0 || line.rfind("DIFFERS", 0) == 0) verdict += line + "\n";
  }
  return verdict;
}

TEST(ShardedVerify, ReportsWhatMonolithicVerifyReports) {
  const std::string dir = MakeTempDir("sharded_verify");
  auto made = RunCli({"make-model", dir + "/m", "--seed", "5", "--hidden", "64", "--layers", "3",
                      "--heads", "4", "--kv-heads", "2", "--inter", "96", "--vocab", "300"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::vector<std::vector<std::string>> runs = {
      {"--gen", "20"},
      {"--gen", "20", "--temperature", "0.9", "--top-p", "0.9", "--seed", "4"},
      {"--gen", "20", "--window", "4", "--evict", "1:2@5"},
      {"--gen", "12", "--trace"},
  };
  using Edit = std::function<void(json&)>;
  const std::vector<std::pair<std::string, Edit>> edits = {
      {"clean", [](json&) {}},
      {"token", [](json& j) {
         const uint32_t t = j["steps"][7]["token"];
         j["steps"][7]["token"] = (t + 1) % 300;
         j["generated_token_ids"][7] = (t + 1) % 300;
       }},
      {"first token", [](json& j) {
         const uint32_t t = j["steps"][0]["token"];
         j["steps"][0]["token"] = (t + 5) % 300;
         j["generated_token_ids"][0] = (t + 5) % 300;
       }},
      {"token outside", [](json& j) {
         j["steps"][4]["token"] = 1000;
         j["generated_token_ids"][4] = 1000;
       }},
      {"logits", [](json& j) { j["steps"][9]["logits_sha256"] = std::string(64, 'a'); }},
  };
  for (size_t r = 0; r < runs.size(); ++r) {
    std::vector<std::string> args = {"run", "--model", dir + "/m", "--ids", "5,9,2,7,5",
                                     "--single-run", "--receipt", dir + "/r.json"};
    args.insert(args.end(), runs[r].begin(), runs[r].end());
    auto made_receipt = RunCli(args);
    ASSERT_EQ(made_receipt.exit_code, 0) << made_receipt.err;
    std::vector<std::pair<std::string, Edit>> cases = edits;
    if (r == 3) {
      cases.push_back({"layer", [](json& j) {
                         std::string d = j["trace"]["steps"][6][1];
                         d[0] = d[0] == 'a' ? 'b' : 'a';
                         j["trace"]["steps"][6][1] = d;
                       }});
    }
    for (const auto& [name, edit] : cases) {
      SCOPED_TRACE(std::to_string(r) + " " + name);
      std::ifstream in(dir + "/r.json");
      json j = json::parse(in);
      edit(j);
      const std::string path = dir + "/e.json";
      std::ofstream(path) << j.dump();
      const std::string mono = Verdict(RunCli({"verify", path, "--model", dir + "/m"}));
      const std::string sharded =
          Verdict(RunCli({"verify", path, "--model", dir + "/m", "--workers", "2"}));
      EXPECT_EQ(sharded, mono);
      EXPECT_EQ(name == "clean", mono.find("VERIFIED") != std::string::npos) << mono;
    }
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::receipt
