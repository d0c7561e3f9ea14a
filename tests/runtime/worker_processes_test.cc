// runtime::WorkerProcesses: structured readiness (the JSON line on
// --ready-fd, checked against the child's key and pid; a child that lies,
// stays silent or dies is refused with a named error), workers started
// with --threads 2 give the digests of a one-thread monolithic run, and a
// run's --weight-cache reaches every worker it spawns.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "cli_runner.h"
#include "coordinator/coordinator.h"
#include "runtime/cluster_run.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

using std::chrono::milliseconds;

// An executable script standing in for `lockstep` (its body may read them).
std::string FakeWorker(const std::string& tag, const std::string& body) {
  const std::string path = MakeTempDir(tag) + "/fake-lockstep";
  std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
  chmod(path.c_str(), 0700);
  return path;
}

Status SpawnFake(const std::string& body, milliseconds timeout = milliseconds(5000)) {
  runtime::WorkerSpawnOptions o;
  o.exe = FakeWorker("fake-worker", body);
  o.ready_timeout = timeout;
  return runtime::WorkerProcesses::Spawn(o).status();
}

TEST(WorkerProcesses, ReadinessNamesEndpointKeyAndPid) {
  auto procs = SpawnWorkerProcesses(2);
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  ASSERT_EQ((*procs)->endpoints().size(), 2u);
  for (const std::string& e : (*procs)->endpoints()) {
    EXPECT_EQ(e.rfind("ipc:///tmp/lockstep-keys-", 0), 0u) << e;
    EXPECT_EQ(e.substr(e.size() - 5), ".sock") << e;
  }
  EXPECT_NE((*procs)->endpoints()[0], (*procs)->endpoints()[1]);
}

TEST(WorkerProcesses, RefusesJunkReadiness) {
  const Status junk = SpawnFake("echo 'not json' >&3; exec sleep 5");
  EXPECT_EQ(junk.kind(), ErrorKind::kCorrupt) << junk.ToString();
  const Status missing = SpawnFake("echo '{\"endpoint\":\"tcp://127.0.0.1:1\"}' >&3; exec sleep 5");
  EXPECT_EQ(missing.kind(), ErrorKind::kCorrupt) << missing.ToString();
  const Status remote = SpawnFake(
      "echo '{\"endpoint\":\"tcp://10.0.0.1:1\",\"curve_public\":\"x\",\"pid\":1}' >&3; exec sleep 5");
  EXPECT_EQ(remote.kind(), ErrorKind::kCorrupt) << remote.ToString();
}

TEST(WorkerProcesses, RefusesAnotherKey) {
  const Status key = SpawnFake(
      "echo \"{\\\"endpoint\\\":\\\"$3\\\",\\\"curve_public\\\":\\\"x\\\","
      "\\\"pid\\\":$$}\" >&3; exec sleep 5");  // $3: the --listen endpoint
  EXPECT_EQ(key.kind(), ErrorKind::kMismatch) << key.ToString();
  EXPECT_NE(key.message().find("CURVE key"), std::string::npos) << key.ToString();
}

TEST(WorkerProcesses, ChildThatDiesOrStaysSilentIsNamed) {
  const Status died = SpawnFake("exit 3");
  EXPECT_EQ(died.kind(), ErrorKind::kDisconnected) << died.ToString();
  EXPECT_NE(died.message().find("fake-lockstep"), std::string::npos) << died.ToString();
  const auto start = std::chrono::steady_clock::now();
  const Status silent = SpawnFake("exec sleep 30", milliseconds(300));
  EXPECT_EQ(silent.kind(), ErrorKind::kTimeout) << silent.ToString();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(WorkerProcesses, TwoThreadWorkersGiveTheMonolithicDigests) {
  const std::string model = MakeModel("threads2", 4, 31);
  auto procs = SpawnWorkerProcesses(2, {}, ComputeOptions{"auto", 2});
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  ClusterConfig cfg;
  cfg.model_dir = model;
  (*procs)->ApplyTo(&cfg);
  DecodeRequest req;
  req.prompt = {5, 17, 2, 9};
  req.gen = 8;
  zmq::context_t context(1);
  {
    auto c = Coordinator::Start(context, cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto run = runtime::RunOnCluster(**c, req, std::nullopt, 1);
    ASSERT_TRUE(run.ok()) << run.status().ToString();
    ExpectSameDecode(run->result, Monolithic(model, req));
    (*c)->ShutdownWorkers("test finished");
  }
  (*procs)->Reap(std::chrono::seconds(3));
}

TEST(WorkerProcesses, RunWithThreadsPassesThemToWorkers) {
  const std::string model = MakeModel("runthreads", 4, 32);
  const CliOutput o = RunCli({"run", "--model", model, "--ids", "3,1,4", "--gen", "6",
                              "--workers", "2", "--threads", "2", "--compare-monolithic"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("sharded == monolithic\n"), std::string::npos) << o.out;
  const CliOutput bad = RunCli({"run", "--model", model, "--ids", "3", "--gen", "2",
                                "--workers", "2", "--isa", "no-such-isa"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("no-such-isa"), std::string::npos) << bad.err;
}

TEST(WorkerProcesses, RunWithAWeightCacheGivesEveryWorkerOne) {
  const std::string model = MakeModel("runcache", 4, 33);
  const std::string cache = MakeTempDir("runcache_files");
  const std::vector<std::string> args = {"run", "--model", model, "--ids", "3,1,4", "--gen", "4",
                                         "--workers", "2", "--weight-cache", cache,
                                         "--compare-monolithic"};
  const CliOutput first = RunCli(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const CliOutput second = RunCli(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.out.find("sharded == monolithic\n"), std::string::npos) << second.out;
  size_t mapped = 0;  // two stages; the monolithic twin of --compare-monolithic is a third
  for (size_t at = 0; (at = second.err.find("matrices read from", at)) != std::string::npos; ++at) ++mapped;
  EXPECT_EQ(mapped, 3u) << second.err;
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cache), {}), 3) << first.err;
}

}  // namespace
}  // namespace lockstep::testing
