// `lockstep run --speculative` writes the receipt plain decoding writes,
// byte for byte, except options.speculative (which no digest covers):
// greedy, sampled, windowed, evicting and traced runs, monolithic and on 2
// and 3 loopback workers (whose multi-row steps run on the workers); and
// verify accepts it (also on two loopback workers).
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_runner.h"
#include "receipt/receipt.h"

namespace lockstep::receipt {
namespace {

using lockstep::testing::MakeTempDir;
using lockstep::testing::ReadJsonFile;
using lockstep::testing::RunCli;
using nlohmann::json;

TEST(SpeculativeReceipt, EqualsThePlainReceiptByteForByte) {
  const std::string dir = MakeTempDir("speculative_receipt");
  auto made = RunCli({"make-model", dir + "/m", "--seed", "3", "--hidden", "64", "--layers", "3",
                      "--heads", "4", "--kv-heads", "2", "--inter", "96", "--vocab", "300"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  const std::vector<std::string> base = {"run", "--model", dir + "/m", "--ids", "5,9,2,7,5,9,2,7,5,9"};
  const std::vector<std::vector<std::string>> cases = {
      {"--gen", "40"},
      {"--gen", "40", "--temperature", "0.8", "--top-k", "20", "--seed", "9"},
      {"--gen", "36", "--window", "5", "--evict", "1:2@3", "--evict", "0:1@20"},
      {"--gen", "24", "--trace", "--evict", "2:3@10"},
  };
  int n = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(n);
    // [workers][plain, speculative]; a sharded receipt also names its
    // plan and workers (endpoints and keys of that run), compared apart.
    std::vector<std::vector<json>> receipts;
    for (const char* workers : {"0", "2", "3"}) {
      receipts.emplace_back();
      for (bool speculative : {false, true}) {
        std::vector<std::string> args = base;
        args.insert(args.end(), c.begin(), c.end());
        const std::string path = dir + "/r" + std::to_string(n) + "w" + workers +
                                 (speculative ? "s" : "p") + ".json";
        args.insert(args.end(), {"--receipt", path, "--single-run", "--workers", workers});
        if (speculative) args.push_back("--speculative");
        auto r = RunCli(args);
        ASSERT_EQ(r.exit_code, 0) << r.err;
        receipts.back().push_back(ReadJsonFile(path));
      }
    }
    for (size_t w = 0; w < receipts.size(); ++w) {
      SCOPED_TRACE("workers " + std::to_string(w == 0 ? 0 : w + 1));
      std::vector<json>& pair = receipts[w];
      EXPECT_FALSE(pair[0]["options"].contains("speculative"));
      EXPECT_EQ(pair[1]["options"]["speculative"], "prompt-lookup");
      pair[1]["options"].erase("speculative");
      for (json& j : pair) j.erase("timings");  // measurements, never compared
      if (w > 0) {
        EXPECT_EQ(pair[1]["plan"], pair[0]["plan"]);
      }
      for (json& j : pair) {
        j.erase("plan");
        j.erase("workers");
      }
      EXPECT_EQ(CanonicalBytes(pair[1]), CanonicalBytes(pair[0]));
      EXPECT_EQ(CanonicalBytes(pair[1]), CanonicalBytes(receipts[0][0]));  // sharded == monolithic
    }
    for (const char* workers : {"0", "2"}) {
      auto v = RunCli({"verify", dir + "/r" + std::to_string(n) + "w2s.json", "--model", dir + "/m",
                       "--workers", workers});
      EXPECT_EQ(v.exit_code, 0) << v.out << v.err;
    }
    ++n;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::receipt
