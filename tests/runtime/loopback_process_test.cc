// Real `lockstep worker` processes over TCP loopback: the CLI's sharded
// mode reproduces the independent conformance digests and equals the
// monolithic run; a killed worker process fails the session in bounded
// time while the other processes stay up; `lockstep coordinator --config`.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

using Clock = std::chrono::steady_clock;

TEST(LoopbackProcesses, ConformanceVectorsReproducedSharded) {
  // Every fixture model has 2 layers: one per worker, two workers.
  ExpectConformanceVectors({"--workers", "2"}, [](const nlohmann::json& got) {
    EXPECT_EQ(got["plan"], "0:1,1:2");
  });
}

TEST(LoopbackProcesses, CompareMonolithicOverTcp) {
  const std::string model = MakeModel("loopback", 4, 3);
  const CliOutput three = RunCli({"run", "--model", model, "--ids", "3,1,4,1,5", "--gen", "8",
                                  "--workers", "3", "--compare-monolithic"});
  ASSERT_EQ(three.exit_code, 0) << three.err;
  EXPECT_NE(three.out.find("sharded == monolithic\n"), std::string::npos) << three.out;
  EXPECT_NE(three.out.find("CIS2_REF digest="), std::string::npos);
  const CliOutput four =
      RunCli({"run", "--model", model, "--ids", "3,1,4,1,5", "--gen", "10", "--plan",
              "0:1,1:2,2:3,3:4", "--window", "3", "--evict", "1:2@2", "--evict", "0:1@6",
              "--compare-monolithic", "--json"});
  ASSERT_EQ(four.exit_code, 0) << four.err;
  const nlohmann::json got = nlohmann::json::parse(four.out);  // --json: one object, nothing else
  EXPECT_EQ(got["sharded_equals_monolithic"], true);
  EXPECT_EQ(got["plan"], "0:1,1:2,2:3,3:4");
  const CliOutput mono = RunCli({"run", "--model", model, "--ids", "3,1,4,1,5", "--gen", "10",
                                 "--window", "3", "--evict", "1:2@2", "--evict", "0:1@6",
                                 "--json"});
  ASSERT_EQ(mono.exit_code, 0) << mono.err;
  const nlohmann::json want = LastLineJson(mono.out);
  for (const char* key : {"generated_token_ids", "argmax_digest", "cis2_ref", "table_digest",
                          "inv_freq_table_digest", "weights_sha256", "config_sha256"}) {
    EXPECT_EQ(got[key], want[key]) << key;
  }
}

TEST(LoopbackProcesses, BadPlanIsRejectedBeforeWorkersStart) {
  const std::string model = MakeModel("badplan", 4, 3);
  const CliOutput o =
      RunCli({"run", "--model", model, "--ids", "1,2", "--gen", "2", "--plan", "0:1,2:4"});
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("Invalid"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find("should start at layer 1"), std::string::npos) << o.err;
  EXPECT_EQ(o.err.find("worker"), std::string::npos) << "no worker should have started: " << o.err;
}

TEST(LoopbackProcesses, KilledWorkerProcessFailsTheSessionOthersStayUp) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string model = MakeModel("kill", 4, 8);
  auto procs = SpawnWorkerProcesses(3);
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  ClusterConfig cfg;
  cfg.model_dir = model;
  (*procs)->ApplyTo(&cfg);
  cfg.auto_plan = false;
  cfg.plan = {{0, 1}, {1, 3}, {3, 4}};
  cfg.heartbeat = std::chrono::milliseconds(100);
  cfg.liveness = 5;
  zmq::context_t context(1);
  {
    auto c = Coordinator::Start(context, cfg);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto session = (*c)->OpenSession(std::nullopt);
    ASSERT_TRUE(session.ok());
    DecodeRequest req;
    req.prompt = {9, 8, 7};
    req.gen = 30;
    Clock::time_point killed;
    struct Killer final : StepBackend {
      StepBackend* inner;
      std::function<void()> kill;
      int feeds = 0;
      Status Feed(std::span<const uint32_t> t, std::vector<float>* l) override {
        if (++feeds == 5) kill();
        return inner->Feed(t, l);
      }
      Status Evict(uint32_t f, uint32_t n) override { return inner->Evict(f, n); }
      uint32_t CacheLength() const override { return inner->CacheLength(); }
    } killer;
    killer.inner = session->get();
    killer.kill = [&] {
      (*procs)->Kill(1);
      killed = Clock::now();
    };
    auto r = RunDecode(killer, req, (*c)->seed());
    ASSERT_FALSE(r.ok());
    EXPECT_LT(Clock::now() - killed, std::chrono::seconds(3));
    EXPECT_EQ(r.status().kind(), ErrorKind::kDisconnected) << r.status().ToString();
    EXPECT_NE(r.status().message().find(cfg.workers[1]), std::string::npos)
        << r.status().message();
    EXPECT_NE(r.status().message().find("stage 1"), std::string::npos);
    for (size_t i : {0u, 2u}) {  // still running
      EXPECT_EQ(waitpid((*procs)->pid(i), nullptr, WNOHANG), 0) << "worker " << i << " exited";
    }
    (*c)->ShutdownWorkers("test finished");
  }
  (*procs)->Reap(std::chrono::seconds(3));
}

TEST(LoopbackProcesses, CoordinatorCommandWithAConfigFile) {
  const std::string model = MakeModel("coordcmd", 4, 4);
  auto procs = SpawnWorkerProcesses(2);
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  nlohmann::json cfg = {{"model", model},
                        {"workers", (*procs)->endpoints()},
                        {"key", (*procs)->coordinator_key_file()},
                        {"worker_keys", (*procs)->worker_public_key_files()},
                        {"plan", "auto"},
                        {"heartbeat_ms", 100},
                        {"liveness", 10},
                        {"request_timeout_ms", 20000}};
  const std::string path = MakeTempDir("coordcfg") + "/cluster.json";
  std::ofstream(path) << cfg.dump(2);
  const CliOutput o = RunCli({"coordinator", "--config", path, "--ids", "7,7,7", "--gen", "6",
                              "--window", "2", "--json", "--shutdown-workers"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const CliOutput mono =
      RunCli({"run", "--model", model, "--ids", "7,7,7", "--gen", "6", "--window", "2", "--json"});
  ASSERT_EQ(mono.exit_code, 0) << mono.err;
  const nlohmann::json got = LastLineJson(o.out), want = LastLineJson(mono.out);
  EXPECT_EQ(got["cis2_ref"], want["cis2_ref"]);
  EXPECT_EQ(got["argmax_digest"], want["argmax_digest"]);
  EXPECT_EQ(got["generated_token_ids"], want["generated_token_ids"]);
  (*procs)->Reap(std::chrono::seconds(3));  // --shutdown-workers: they exit by themselves
}

}  // namespace
}  // namespace lockstep::testing
