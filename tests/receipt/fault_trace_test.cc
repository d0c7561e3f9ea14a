// Fault injection (test build only): workers of the test-only binary flip
// one bit of the hidden state at LOCKSTEP_FAULT_FLIP="STEP:LAYER:INDEX".
// The traced receipt of such a sharded run, verified against the clean
// model, names exactly that step, that layer and the worker serving it;
// everything before it equals a clean traced monolithic run.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "cli_runner.h"
#include "cluster_fixture.h"

namespace lockstep::testing {
namespace {

using nlohmann::json;

class FaultTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("fault-trace"));
    auto made = RunCli({"make-model", Model(), "--seed", "6", "--hidden", "64", "--layers", "4",
                        "--heads", "4", "--kv-heads", "2", "--inter", "96", "--vocab", "300"});
    ASSERT_EQ(made.exit_code, 0) << made.err;
    auto clean = RunCli({"run", "--model", Model(), "--ids", "3,1,4,1,5", "--gen", "5", "--trace",
                         "--json", "--single-run"});
    ASSERT_EQ(clean.exit_code, 0) << clean.err;
    clean_ = new json(LastLineJson(clean.out));
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
    delete clean_;
  }
  static std::string Model() { return *dir_ + "/m"; }

  // A receipt of a run on fault-injecting workers (plan [0,1),[1,4)).
  static json FaultyReceipt(const std::string& fault, bool trace, TestCluster* cluster) {
    setenv("LOCKSTEP_FAULT_FLIP", fault.c_str(), 1);
    *cluster = StartTestCluster(LOCKSTEP_FAULT_WORKER_PATH, 2, *dir_, Model(), "[[0,1],[1,4]]");
    unsetenv("LOCKSTEP_FAULT_FLIP");
    if (cluster->procs == nullptr) return json();
    const std::string path = *dir_ + "/faulty.json";
    std::vector<std::string> args = {"coordinator", "--config", cluster->config_path, "--ids",
                                     "3,1,4,1,5", "--gen", "5", "--receipt", path};
    if (trace) args.push_back("--trace");
    auto run = RunCli(args);
    EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
    return json::parse(std::ifstream(path));
  }
  static testing::CliOutput VerifyClean() {
    return RunCli({"verify", *dir_ + "/faulty.json", "--model", Model()});
  }

  static std::string* dir_;
  static json* clean_;
};
std::string* FaultTrace::dir_ = nullptr;
json* FaultTrace::clean_ = nullptr;

TEST_F(FaultTrace, FlipOnTheSecondWorkerIsNamedAtItsStepAndLayer) {
  TestCluster cluster;
  const json r = FaultyReceipt("2:2:5", true, &cluster);
  ASSERT_NE(cluster.procs, nullptr);
  const json& clean = (*clean_)["trace"]["steps"];
  const json& faulty = r["trace"]["steps"];
  ASSERT_EQ(faulty.size(), 5u);
  for (int s = 0; s < 2; ++s) EXPECT_EQ(faulty[s], clean[s]) << "step " << s;
  EXPECT_EQ(faulty[2][0], clean[2][0]);
  EXPECT_EQ(faulty[2][1], clean[2][1]);
  EXPECT_NE(faulty[2][2], clean[2][2]);

  auto v = VerifyClean();
  EXPECT_EQ(v.exit_code, 1) << v.err;
  const std::string want = "DIFFERS: step 2 layer 2: hidden_sha256 receipt " +
                           faulty[2][2].get<std::string>() + " recomputed " +
                           clean[2][2].get<std::string>() + "; computed by worker " +
                           cluster.procs->endpoints()[1] + " (stage 1, layers [1,4), curve_public " +
                           cluster.worker_curve_public[1] + ")";
  EXPECT_NE(v.out.find(want), std::string::npos) << v.out;
}

TEST_F(FaultTrace, FlipInThePrefillOnTheFirstWorkerIsNamed) {
  TestCluster cluster;
  const json r = FaultyReceipt("0:0:7", true, &cluster);
  ASSERT_NE(cluster.procs, nullptr);
  auto v = VerifyClean();
  EXPECT_EQ(v.exit_code, 1) << v.err;
  EXPECT_NE(v.out.find("DIFFERS: step 0 layer 0: hidden_sha256 receipt"), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("computed by worker " + cluster.procs->endpoints()[0] + " (stage 0"),
            std::string::npos) << v.out;
}

TEST_F(FaultTrace, UntracedReceiptOfTheSameFaultOnlyNamesTheStep) {
  TestCluster cluster;
  const json r = FaultyReceipt("2:2:5", false, &cluster);
  ASSERT_NE(cluster.procs, nullptr);
  EXPECT_FALSE(r.contains("trace"));
  auto v = VerifyClean();
  EXPECT_EQ(v.exit_code, 1) << v.err;
  EXPECT_NE(v.out.find("DIFFERS: step 2: logits_sha256 receipt"), std::string::npos) << v.out;
}

}  // namespace
}  // namespace lockstep::testing
