// Recovery: real `lockstep worker` processes are SIGKILLed mid-decode at
// seeded steps. With a spare (or the worker restarted on its address) the
// coordinator rebuilds the dead stage and every session's decode equals the
// monolithic run bit for bit; without one the session fails, naming the
// dead worker, within heartbeat x liveness.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <thread>

#include "cli_runner.h"
#include "engine/ops/fp_env.h"
#include "keys/identity.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr int kLayers = 6;

// Runs `action` once, just before the n-th step (1: the prefill). relay:
// pass the decode's promise of chained steps on, so the pipeline relays
// them (the action then lands in the middle of a relay).
class KillAtStep final : public StepBackend {
 public:
  KillAtStep(StepBackend& inner, int n, std::function<void()> action, bool relay = true)
      : inner_(inner), n_(n), action_(std::move(action)), relay_(relay) {}
  Status Feed(std::span<const uint32_t> t, std::vector<float>* l) override {
    Tick();
    return inner_.Feed(t, l);
  }
  Result<StepOutcome> FeedAndChoose(std::span<const uint32_t> t, const StepContext& ctx) override {
    Tick();
    return inner_.FeedAndChoose(t, ctx);
  }
  Status Evict(uint32_t f, uint32_t c) override { return inner_.Evict(f, c); }
  void ExpectChainedSteps(uint32_t steps) override {
    if (relay_) inner_.ExpectChainedSteps(steps);
  }
  uint32_t CacheLength() const override { return inner_.CacheLength(); }

 private:
  void Tick() {
    if (++steps_ == n_) action_();
  }
  StepBackend& inner_;
  int n_;
  int steps_ = 0;
  std::function<void()> action_;
  bool relay_;
};

class Recovery : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("recovery", kLayers, 31)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }
  void TearDown() override {
    coordinator_.reset();
    procs_.reset();  // kills and reaps the children
  }

  static DecodeRequest Req(uint32_t gen, std::vector<uint32_t> prompt = {5, 6, 7, 8}) {
    DecodeRequest r;
    r.prompt = std::move(prompt);
    r.gen = gen;
    return r;
  }

  // 3 stages of 2 layers on worker processes, `spares` more in reserve;
  // a silent worker is dead after 10 x 100 ms (a killed one at once: its
  // connection closes).
  void StartCluster(int spares) {
    runtime::WorkerSpawnOptions o;
    o.exe = LOCKSTEP_CLI_PATH;
    o.count = 3;
    o.spares = spares;
    auto procs = runtime::WorkerProcesses::Spawn(o);
    ASSERT_TRUE(procs.ok()) << procs.status().ToString();
    procs_ = std::move(procs).value();
    procs_->ApplyTo(&cfg_);
    cfg_.model_dir = *model_;
    cfg_.auto_plan = false;
    cfg_.plan = {{0, 2}, {2, 4}, {4, 6}};
    cfg_.heartbeat = 100ms;
    cfg_.liveness = 10;
    cfg_.request_timeout = 10s;
  }
  void Connect() {
    auto c = Coordinator::Start(context_, cfg_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    coordinator_ = std::move(c).value();
  }
  void SetUpCluster(int spares) {
    StartCluster(spares);
    if (!HasFatalFailure()) Connect();
  }
  // The decode of `req` with worker `victim` killed before step `at`.
  Result<DecodeResult> DecodeKilling(const DecodeRequest& req, size_t victim, int at,
                                     std::optional<int> window = std::nullopt,
                                     bool relay = true) {
    auto session = coordinator_->OpenSession(window);
    if (!session.ok()) return session.status();
    KillAtStep killer(**session, at, [&] { procs_->Kill(victim); }, relay);
    return RunDecode(killer, req, coordinator_->seed());
  }

  static std::string* model_;
  zmq::context_t context_{1};
  ClusterConfig cfg_;
  std::unique_ptr<runtime::WorkerProcesses> procs_;
  std::unique_ptr<Coordinator> coordinator_;
};
std::string* Recovery::model_ = nullptr;

// Links are monitored (closed connections, refused keys); a monitor left
// on a closed socket once broke the next coordinator's handshake.
TEST_F(Recovery, CoordinatorsOneAfterAnotherOnOneContextEachConnect) {
  const DecodeRequest req = Req(4);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("cluster " + std::to_string(i));
    SetUpCluster(1);
    if (HasFatalFailure()) return;
    auto session = coordinator_->OpenSession(std::nullopt);
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE(RunDecode(**session, req, coordinator_->seed()).ok());
    session->reset();
    TearDown();
  }
}

TEST_F(Recovery, WorkersShutDownOnPurposeAreNotRebuilt) {
  SetUpCluster(1);
  if (HasFatalFailure()) return;
  coordinator_->ShutdownWorkers("done");
  const auto deadline = Clock::now() + 5s;
  while (coordinator_->health().ok() && Clock::now() < deadline) std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(coordinator_->health().ok());
  EXPECT_EQ(coordinator_->recoveries(), 0u);
  // The workers' exit ends the cluster; no spare is brought in for them.
  const std::string why = coordinator_->health().message();
  EXPECT_EQ(why.find("spare"), std::string::npos) << why;
  // Whichever worker's exit the coordinator saw first is named.
  EXPECT_TRUE(std::any_of(cfg_.workers.begin(), cfg_.workers.end(),
                          [&](const std::string& w) { return why.find(w) != std::string::npos; }))
      << why;
}

TEST(RecoveryConfig, SparesNameAnEndpointAndAPinnedKey) {
  const std::string dir = MakeTempDir("spares-config");
  for (const char* name : {"coordinator", "w0", "s0"}) {
    ASSERT_TRUE(keys::WriteIdentity(keys::GenerateIdentity().value(), dir + "/" + name).ok());
  }
  const std::string head = R"({"model": "/m", "workers": ["tcp://10.0.0.1:5555"],
      "key": "coordinator", "worker_keys": ["w0.pub"], "spares": )";
  auto c = ParseClusterConfig(head + R"([{"endpoint": "tcp://10.0.0.9:5555", "key": "s0.pub"}]})",
                              "c.json", dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->spares.size(), 1u);
  EXPECT_EQ(c->spares[0].endpoint, "tcp://10.0.0.9:5555");
  EXPECT_EQ(c->spares[0].key, keys::ReadPublicIdentity(dir + "/s0.pub")->curve_public_z85);
  for (const auto& [spares, why] : std::vector<std::pair<std::string, std::string>>{
           {R"([{"endpoint": "tcp://10.0.0.9:5555"}])", "needs a \"key\""},
           {R"([{"endpoint": "tcp://10.0.0.9:99999", "key": "s0.pub"}])", "out of range"},
           {R"([{"endpoint": "tcp://10.0.0.9:5555", "key": "s0.pub", "x": 1}])", "\"x\""},
           {R"(["tcp://10.0.0.9:5555"])", "no \"endpoint\""},
           {R"([{"endpoint": "tcp://10.0.0.9:5555", "key": "missing.pub"}])", "spares"}}) {
    auto bad = ParseClusterConfig(head + spares + "}", "c.json", dir);
    ASSERT_FALSE(bad.ok()) << spares;
    EXPECT_NE(bad.status().message().find(why), std::string::npos) << bad.status().message();
  }
  std::filesystem::remove_all(dir);
}

// Killed in the middle of a relay, and with every step requested by the
// coordinator: the relay's ring (last stage -> first) is re-wired too.
TEST_F(Recovery, EachStageKilledAtASeededStepIsRebuiltOnASpare) {
  std::mt19937 rng(20261130);
  const DecodeRequest req = Req(12);
  const DecodeResult want = Monolithic(*model_, req);
  for (size_t run = 0; run < 6; ++run) {
    const size_t victim = run % 3;
    const bool relay = run < 3;
    const int at = 1 + static_cast<int>(rng() % req.gen);
    SCOPED_TRACE("stage " + std::to_string(victim) + " killed before step " + std::to_string(at) +
                 (relay ? ", relaying" : ", no relay"));
    SetUpCluster(1);
    if (HasFatalFailure()) return;
    Result<DecodeResult> got = DecodeKilling(req, victim, at, std::nullopt, relay);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSameDecode(*got, want);
    EXPECT_EQ(coordinator_->recoveries(), 1u);
    EXPECT_TRUE(coordinator_->health().ok()) << coordinator_->health().ToString();
    TearDown();
  }
}

TEST_F(Recovery, WindowAndEvictionsAreReplayedAtTheSamePoints) {
  DecodeRequest req = Req(14, {3, 1, 4, 1, 5, 9});
  req.evictions = {EvictSpec{1, 2, 3}, EvictSpec{0, 1, 8}};
  const int window = 5;
  const DecodeResult want = Monolithic(*model_, req, window);
  SetUpCluster(1);
  if (HasFatalFailure()) return;
  // Unrelayed: the kill lands before step 12 is sent (relayed, the steps
  // after the last eviction could all have run before the kill landed,
  // leaving nothing to recover).
  Result<DecodeResult> got = DecodeKilling(req, 1, 11, window, /*relay=*/false);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameDecode(*got, want);
  EXPECT_EQ(coordinator_->recoveries(), 1u);
}

TEST_F(Recovery, TwoDeathsUseTwoSpares) {
  const DecodeRequest req = Req(12);
  SetUpCluster(2);
  if (HasFatalFailure()) return;
  auto session = coordinator_->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  KillAtStep first(**session, 3, [&] { procs_->Kill(2); });
  // The spare that took stage 2 (child 3) dies in turn.
  KillAtStep second(first, 9, [&] { procs_->Kill(3); });
  Result<DecodeResult> got = RunDecode(second, req, coordinator_->seed());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameDecode(*got, Monolithic(*model_, req));
  EXPECT_EQ(coordinator_->recoveries(), 2u);
  // What /healthz lists: stage 2 is served by the second spare, and the two
  // workers it was moved off are named as replaced, not as serving.
  const std::vector<StageState> stages = coordinator_->stages();
  ASSERT_EQ(stages.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    SCOPED_TRACE("stage " + std::to_string(k));
    EXPECT_TRUE(stages[k].status.ok()) << stages[k].status.ToString();
    EXPECT_EQ(stages[k].endpoint, procs_->endpoints()[k == 2 ? 4 : k]);
    const std::vector<std::string> replaced =
        k == 2 ? std::vector<std::string>{procs_->endpoints()[2], procs_->endpoints()[3]}
               : std::vector<std::string>{};
    EXPECT_EQ(stages[k].replaced, replaced);
  }
}

TEST_F(Recovery, AWorkerRestartedOnItsAddressTakesItsStageBack) {
  const DecodeRequest req = Req(10);
  StartCluster(0);
  ASSERT_FALSE(HasFatalFailure());
  cfg_.spares = {SpareWorker{cfg_.workers[1], cfg_.worker_keys[1]}};
  Connect();
  ASSERT_FALSE(HasFatalFailure());
  auto session = coordinator_->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  Status restarted;
  KillAtStep killer(**session, 5, [&] { restarted = procs_->Restart(1); });
  Result<DecodeResult> got = RunDecode(killer, req, coordinator_->seed());
  ASSERT_TRUE(restarted.ok()) << restarted.ToString();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameDecode(*got, Monolithic(*model_, req));
  EXPECT_EQ(coordinator_->recoveries(), 1u);
}

TEST_F(Recovery, EverySessionOfTheClusterIsRebuiltForkedOnesToo) {
  const DecodeRequest a = Req(12, {2, 7, 1, 8});
  const DecodeRequest b = Req(12, {9, 9, 8});
  SetUpCluster(1);
  if (HasFatalFailure()) return;
  // A forked session that is idle while the stage dies: it must replay its
  // parent's history with its own.
  auto parent = coordinator_->OpenSession(std::nullopt);
  ASSERT_TRUE(parent.ok());
  std::vector<float> logits;
  ASSERT_TRUE((*parent)->Feed(a.prompt, &logits).ok());
  auto forked = (*parent)->Fork();
  ASSERT_TRUE(forked.ok());
  std::vector<float> after_fork;
  std::optional<Result<DecodeResult>> got_b;
  std::thread other([&] {
    auto s = coordinator_->OpenSession(std::nullopt);
    if (!s.ok()) {
      got_b = s.status();
      return;
    }
    got_b = RunDecode(**s, b, coordinator_->seed());
  });
  Result<DecodeResult> got_a = DecodeKilling(a, 0, 4);
  other.join();
  ASSERT_TRUE(got_a.ok()) << got_a.status().ToString();
  ASSERT_TRUE(got_b && got_b->ok()) << (got_b ? got_b->status().ToString() : "");
  ExpectSameDecode(*got_a, Monolithic(*model_, a));
  ExpectSameDecode(**got_b, Monolithic(*model_, b));
  // The fork continues after the prompt exactly as a fresh session would.
  const uint32_t next[] = {42};
  ASSERT_TRUE((*forked)->Feed(next, &after_fork).ok());
  auto fresh = coordinator_->OpenSession(std::nullopt);
  ASSERT_TRUE(fresh.ok());
  std::vector<float> want;
  ASSERT_TRUE((*fresh)->Feed(a.prompt, &want).ok());
  ASSERT_TRUE((*fresh)->Feed(next, &want).ok());
  ASSERT_EQ(after_fork.size(), want.size());
  EXPECT_EQ(0, std::memcmp(after_fork.data(), want.data(), want.size() * sizeof(float)));
  EXPECT_EQ(coordinator_->recoveries(), 1u);
}

TEST_F(Recovery, WithoutASpareTheSessionFailsNamingTheDeadWorkerInTime) {
  SetUpCluster(0);
  if (HasFatalFailure()) return;
  Clock::time_point killed;
  auto session = coordinator_->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  // Unrelayed: each step is sent after the kill before it, so the steps
  // after the kill must meet the dead worker (relayed, the pipeline could
  // have run every remaining step before the kill landed).
  KillAtStep killer(
      **session, 4,
      [&] {
        procs_->Kill(1);
        killed = Clock::now();
      },
      /*relay=*/false);
  Result<DecodeResult> got = RunDecode(killer, Req(12), coordinator_->seed());
  const auto waited = Clock::now() - killed;
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().kind(), ErrorKind::kDisconnected) << got.status().ToString();
  EXPECT_NE(got.status().message().find(cfg_.workers[1]), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("stage 1"), std::string::npos) << got.status().message();
  EXPECT_LT(waited, 3s);  // 10 x 100 ms, plus slack
  EXPECT_EQ(coordinator_->recoveries(), 0u);
}

TEST_F(Recovery, WhenTheSparesRunOutTheSessionFailsNamingTheDeadWorker) {
  SetUpCluster(1);
  if (HasFatalFailure()) return;
  auto session = coordinator_->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  // Unrelayed, as above: the steps after each kill meet the dead worker.
  KillAtStep first(**session, 3, [&] { procs_->Kill(1); }, /*relay=*/false);
  Clock::time_point killed;
  KillAtStep second(
      first, 7,
      [&] {
        procs_->Kill(3);  // the spare now serving stage 1
        killed = Clock::now();
      },
      /*relay=*/false);
  Result<DecodeResult> got = RunDecode(second, Req(12), coordinator_->seed());
  const auto waited = Clock::now() - killed;
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().kind(), ErrorKind::kDisconnected) << got.status().ToString();
  EXPECT_NE(got.status().message().find(procs_->endpoints()[3]), std::string::npos)
      << got.status().message();
  EXPECT_NE(got.status().message().find("no spare left"), std::string::npos)
      << got.status().message();
  EXPECT_LT(waited, 3s);
  EXPECT_EQ(coordinator_->recoveries(), 1u);
  // Stage 1's worker now is the dead spare, listed as failed; the others serve.
  const std::vector<StageState> stages = coordinator_->stages();
  ASSERT_EQ(stages.size(), 3u);
  EXPECT_EQ(stages[1].endpoint, procs_->endpoints()[3]);
  EXPECT_EQ(stages[1].replaced, (std::vector<std::string>{procs_->endpoints()[1]}));
  EXPECT_EQ(stages[1].status.kind(), ErrorKind::kDisconnected) << stages[1].status.ToString();
  EXPECT_TRUE(stages[0].status.ok() && stages[2].status.ok());
}

}  // namespace
}  // namespace lockstep::testing
