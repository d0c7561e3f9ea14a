// Receipts of runs on a configured cluster: `lockstep coordinator --config
// --trace` records every worker's pinned CURVE key and per-layer digests,
// and `lockstep verify --config` recomputes on that cluster; the same
// receipt verifies monolithically (the trace is plan-independent).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli_runner.h"
#include "cluster_fixture.h"

namespace lockstep::testing {
namespace {

using nlohmann::json;

// A 4-layer model in DIR/m and two workers serving it cut as `plan`
// (procs null when the model could not be made).
TestCluster ModelOnTwoWorkers(const std::string& dir, const std::string& plan) {
  auto made = RunCli({"make-model", dir + "/m", "--seed", "5", "--hidden", "64", "--layers", "4",
                      "--heads", "4", "--kv-heads", "2", "--inter", "96", "--vocab", "300"});
  EXPECT_EQ(made.exit_code, 0) << made.err;
  if (made.exit_code != 0) return {};
  return StartTestCluster(LOCKSTEP_CLI_PATH, 2, dir, dir + "/m", plan);
}

TEST(ClusterReceipt, TracedCoordinatorReceiptNamesWorkerKeysAndVerifiesOnTheCluster) {
  const std::string dir = MakeTempDir("cluster-receipt");
  const std::string model = dir + "/m";
  TestCluster cluster = ModelOnTwoWorkers(dir, "[[0,1],[1,4]]");
  ASSERT_NE(cluster.procs, nullptr);
  ASSERT_EQ(cluster.worker_curve_public.size(), 2u);
  const std::string receipt = dir + "/r.json";
  auto run = RunCli({"coordinator", "--config", cluster.config_path, "--ids", "4,8,15", "--gen",
                     "4", "--trace", "--receipt", receipt});
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;

  json r = json::parse(std::ifstream(receipt));
  ASSERT_EQ(r["workers"].size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(r["workers"][k]["curve_public"], cluster.worker_curve_public[k]) << r["workers"];
    EXPECT_EQ(r["workers"][k]["endpoint"], cluster.procs->endpoints()[k]);
  }
  ASSERT_TRUE(r.contains("trace"));
  EXPECT_EQ(r["trace"]["layers"], 4);
  EXPECT_EQ(r["trace"]["steps"].size(), 4u);

  auto on_cluster = RunCli({"verify", receipt, "--config", cluster.config_path});
  EXPECT_EQ(on_cluster.exit_code, 0) << on_cluster.out << on_cluster.err;
  EXPECT_NE(on_cluster.out.find("recomputed            = cluster " + cluster.config_path),
            std::string::npos) << on_cluster.out;
  EXPECT_NE(on_cluster.out.find("trace                 = 4 layer digests per step"),
            std::string::npos) << on_cluster.out;
  EXPECT_NE(on_cluster.out.find("VERIFIED"), std::string::npos);

  // The traced monolithic run has the same per-layer digests.
  auto mono = RunCli({"verify", receipt, "--model", model});
  EXPECT_EQ(mono.exit_code, 0) << mono.out << mono.err;

  // A changed layer digest is named with the worker that computed it.
  r["trace"]["steps"][1][2] = std::string(64, 'd');
  std::ofstream(dir + "/edited.json") << r.dump();
  auto edited = RunCli({"verify", dir + "/edited.json", "--config", cluster.config_path});
  EXPECT_EQ(edited.exit_code, 1);
  EXPECT_NE(edited.out.find("DIFFERS: step 1 layer 2: hidden_sha256 receipt " +
                            std::string(64, 'd')),
            std::string::npos) << edited.out << edited.err;
  EXPECT_NE(edited.out.find("computed by worker " + cluster.procs->endpoints()[1] +
                            " (stage 1, layers [1,4), curve_public " +
                            cluster.worker_curve_public[1] + ")"),
            std::string::npos) << edited.out;
  cluster.procs->Reap(std::chrono::milliseconds(0));
  std::filesystem::remove_all(dir);
}

// `coordinator --speculative` checks prompt-lookup proposals (and with
// `--draft-model`, a draft model's: here the model itself, whose greedy
// proposals are all kept) as multi-row steps on the workers and writes the
// plain run's receipt, byte for byte, but for options.speculative (no
// digest covers it) and the timings.
TEST(ClusterReceipt, SpeculativeCoordinatorReceiptEqualsThePlainOne) {
  const std::string dir = MakeTempDir("cluster-speculative");
  TestCluster cluster = ModelOnTwoWorkers(dir, "[[0,2],[2,4]]");
  ASSERT_NE(cluster.procs, nullptr);
  std::vector<json> receipts;
  const std::vector<std::vector<std::string>> modes = {
      {}, {"--speculative"}, {"--draft-model", dir + "/m"}};
  for (size_t mode = 0; mode < modes.size(); ++mode) {
    SCOPED_TRACE(mode);
    const std::string path = dir + "/r" + std::to_string(mode) + ".json";
    std::vector<std::string> args = {"coordinator", "--config", cluster.config_path, "--ids",
                                     "4,8,15,16,4,8,15,16,4,8", "--gen", "12", "--receipt", path};
    args.insert(args.end(), modes[mode].begin(), modes[mode].end());
    auto run = RunCli(args);
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    EXPECT_EQ(run.out.find("speculative           = ") != std::string::npos, mode > 0)
        << run.out;
    if (mode == 2) {
      EXPECT_NE(run.out.find("(100.0%)"), std::string::npos) << run.out;
    }
    receipts.push_back(ReadJsonFile(path));
  }
  EXPECT_FALSE(receipts[0]["options"].contains("speculative"));
  EXPECT_EQ(receipts[1]["options"]["speculative"], "prompt-lookup");
  EXPECT_EQ(receipts[2]["options"]["speculative"], "draft-model");
  for (json& j : receipts) {
    j["options"].erase("speculative");
    j.erase("timings");
  }
  EXPECT_EQ(receipts[1].dump(), receipts[0].dump());
  EXPECT_EQ(receipts[2].dump(), receipts[0].dump());
  cluster.procs->Reap(std::chrono::milliseconds(0));
  std::filesystem::remove_all(dir);
}

// `coordinator` takes the request options `run` takes, sampling included:
// a seeded sampled run on the cluster (plain and speculative) writes the
// monolithic `run`'s receipt but for where it ran, and verify accepts it.
TEST(ClusterReceipt, SampledCoordinatorReceiptEqualsTheMonolithicRun) {
  const std::string dir = MakeTempDir("cluster-sampled");
  TestCluster cluster = ModelOnTwoWorkers(dir, "[[0,1],[1,4]]");
  ASSERT_NE(cluster.procs, nullptr);
  const std::vector<std::string> request = {"--ids", "4,8,15,16", "--gen", "20", "--temperature",
                                            "0.9", "--top-k", "40", "--seed", "7"};
  auto with = [&](std::vector<std::string> head, const std::string& path) {
    head.insert(head.end(), request.begin(), request.end());
    head.insert(head.end(), {"--receipt", path});
    return head;
  };
  auto mono = RunCli(with({"run", "--model", dir + "/m", "--single-run"}, dir + "/mono.json"));
  ASSERT_EQ(mono.exit_code, 0) << mono.out << mono.err;
  json want = ReadJsonFile(dir + "/mono.json");
  EXPECT_EQ(want["options"]["sampling"]["seed"], 7);
  for (const char* key : {"timings", "plan", "workers"}) want.erase(key);
  for (bool speculative : {false, true}) {
    SCOPED_TRACE(speculative ? "speculative" : "plain");
    const std::string path = dir + (speculative ? "/s.json" : "/p.json");
    std::vector<std::string> args = with({"coordinator", "--config", cluster.config_path}, path);
    if (speculative) args.push_back("--speculative");
    auto run = RunCli(args);
    ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
    json got = ReadJsonFile(path);
    EXPECT_EQ(got["plan"], "0:1,1:4");
    got["options"].erase("speculative");
    for (const char* key : {"timings", "plan", "workers"}) got.erase(key);
    EXPECT_EQ(got.dump(), want.dump());
    auto verified = RunCli({"verify", path, "--model", dir + "/m"});
    EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
  }
  cluster.procs->Reap(std::chrono::milliseconds(0));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::testing
