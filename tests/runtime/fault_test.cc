// Damage and failure: frames arrive bit-identical and a flipped bit is
// caught; a dead worker fails its sessions in bounded time without taking
// the others down; a worker with a different model, and a bad plan, are
// refused before any decoding.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

using Clock = std::chrono::steady_clock;

class Faults : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("faults", 4, 5)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }
  static DecodeRequest Req(uint32_t gen) {
    DecodeRequest r;
    r.prompt = {11, 22, 33};
    r.gen = gen;
    return r;
  }
  static std::string* model_;
};
std::string* Faults::model_ = nullptr;

// Runs `action` once, just before the n-th Feed.
class TriggerBackend final : public StepBackend {
 public:
  TriggerBackend(StepBackend& inner, int n, std::function<void()> action)
      : inner_(inner), n_(n), action_(std::move(action)) {}
  Status Feed(std::span<const uint32_t> t, std::vector<float>* l) override {
    if (++feeds_ == n_) action_();
    return inner_.Feed(t, l);
  }
  Status Evict(uint32_t f, uint32_t c) override { return inner_.Evict(f, c); }
  uint32_t CacheLength() const override { return inner_.CacheLength(); }

 private:
  StepBackend& inner_;
  int n_;
  int feeds_ = 0;
  std::function<void()> action_;
};

TEST_F(Faults, HiddenFramesArriveBitIdenticalToWhatWasSent) {
  std::mutex mu;
  std::set<std::vector<uint8_t>> sent;
  std::vector<wire::HiddenFrame> received;
  InProcCluster cluster(2, [&](size_t i, WorkerOptions& o) {
    if (i == 0) {
      o.next_hop_transport.mutate_outgoing_for_testing = [&](std::vector<uint8_t>& f) {
        std::lock_guard<std::mutex> lock(mu);
        sent.insert(f);
      };
    } else {
      o.observe_hidden_for_testing = [&](const wire::HiddenFrame& f) {
        std::lock_guard<std::mutex> lock(mu);
        received.push_back(f);
      };
    }
  });
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto session = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  auto r = RunDecode(**session, Req(6), (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(received.size(), 6u);  // the prefill and five decode steps
  EXPECT_EQ(received[0].seq, 3u);
  for (const wire::HiddenFrame& f : received) {
    EXPECT_EQ(f.resume_layer, 2u);
    EXPECT_TRUE(sent.count(wire::MarshalHidden(f))) << "frame of step " << f.step
                                                    << " differs from every frame sent";
  }
}

TEST_F(Faults, BitFlippedInTransitIsDetectedAndNamed) {
  std::atomic<bool> flip{false};
  InProcCluster cluster(3, [&](size_t i, WorkerOptions& o) {
    if (i != 1) return;
    o.next_hop_transport.mutate_outgoing_for_testing = [&](std::vector<uint8_t>& f) {
      if (flip.load() && f.size() > 200) f[f.size() / 2] ^= 0x04;  // hidden frames only
    };
  });
  auto c = Coordinator::Start(cluster.context(),
                              cluster.Config(*model_, {{0, 1}, {1, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto session = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  std::vector<float> logits;
  const uint32_t prompt[] = {1, 2, 3};
  ASSERT_TRUE((*session)->Feed(prompt, &logits).ok());
  flip = true;
  const uint32_t one[] = {4};
  Status st = (*session)->Feed(one, &logits);
  EXPECT_EQ(st.kind(), ErrorKind::kCorrupt) << st.ToString();
  EXPECT_NE(st.message().find("digest mismatch"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("stage 2"), std::string::npos) << st.message();
  // The session stays failed; the workers keep serving new sessions.
  EXPECT_FALSE((*session)->Feed(one, &logits).ok());
  flip = false;
  auto fresh = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(fresh.ok());
  auto r = RunDecode(**fresh, Req(5), (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(*model_, Req(5)));
}

TEST_F(Faults, WorkerStoppedMidDecodeFailsTheSessionInBoundedTime) {
  InProcCluster cluster(3);
  auto c = Coordinator::Start(cluster.context(),
                              cluster.Config(*model_, {{0, 1}, {1, 3}, {3, 4}}, 50, 4));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto session = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  Clock::time_point killed;
  TriggerBackend killer(**session, 4, [&] {
    cluster.StopWorker(1);
    killed = Clock::now();
  });
  auto r = RunDecode(killer, Req(20), (*c)->seed());
  const auto waited = Clock::now() - killed;
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kDisconnected) << r.status().ToString();
  EXPECT_NE(r.status().message().find(cluster.endpoints()[1]), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("stage 1"), std::string::npos) << r.status().message();
  EXPECT_LT(waited, std::chrono::seconds(3));  // liveness 4 x 50 ms, plus slack
  // The others are still up and answer heartbeats.
  EXPECT_TRUE(cluster.Running(0));
  EXPECT_TRUE(cluster.Running(2));
  for (size_t i : {0u, 2u}) {
    auto client = wire::Client::Connect(cluster.context(), cluster.endpoints()[i], "probe");
    ASSERT_TRUE(client.ok());
    ASSERT_TRUE(client->Send(wire::MarshalMessage(wire::Heartbeat{1, "probe"})).ok());
    auto reply = client->Receive(std::chrono::seconds(5));
    ASSERT_TRUE(reply.ok()) << "worker " << i << ": " << reply.status().ToString();
  }
  // Later sessions fail too, within the same bound, instead of waiting.
  const auto start = Clock::now();
  auto again = (*c)->OpenSession(std::nullopt);
  if (again.ok()) {
    auto r2 = RunDecode(**again, Req(3), (*c)->seed());
    EXPECT_FALSE(r2.ok());
  }
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
  EXPECT_FALSE((*c)->health().ok());
}

TEST_F(Faults, WorkersDropTheSessionsOfAVanishedCoordinator) {
  InProcCluster cluster(2, [](size_t, WorkerOptions& o) {
    o.orphan_after = std::chrono::milliseconds(300);
  });
  {
    auto c = Coordinator::Start(cluster.context(),
                                cluster.Config(*model_, {{0, 2}, {2, 4}}, 50, 10));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto a = (*c)->OpenSession(std::nullopt);
    auto b = (*c)->OpenSession(std::nullopt);
    ASSERT_TRUE(a.ok() && b.ok());
    std::vector<float> logits;
    const uint32_t prompt[] = {1, 2, 3};
    ASSERT_TRUE((*a)->Feed(prompt, &logits).ok());
    ASSERT_TRUE((*b)->Feed(prompt, &logits).ok());
    EXPECT_EQ(cluster.worker(1).session_count(), 2u);
    // Heartbeats (every 50 ms) keep the sessions alive past orphan_after.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    EXPECT_EQ(cluster.worker(0).session_count(), 2u);
    (*c).reset();  // the coordinator vanishes without releasing anything
    // Leaked on purpose: destroying them now would post to the destroyed
    // coordinator. A vanished coordinator never sends Release.
    a->release();
    b->release();
  }
  const auto deadline = Clock::now() + std::chrono::seconds(3);
  while (Clock::now() < deadline &&
         (cluster.worker(0).session_count() || cluster.worker(1).session_count())) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(cluster.worker(0).session_count(), 0u);
  EXPECT_EQ(cluster.worker(1).session_count(), 0u);
}

TEST_F(Faults, WorkerWithADifferentModelIsRefusedAtHandshake) {
  const std::string other = MakeModel("faults-other", 4, 6);
  InProcCluster cluster(2, [&](size_t i, WorkerOptions& o) {
    if (i == 1) o.model_dir_override = other;
  });
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 2}, {2, 4}}));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().kind(), ErrorKind::kMismatch) << c.status().ToString();
  EXPECT_NE(c.status().message().find("weights_sha256"), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(cluster.endpoints()[1]), std::string::npos)
      << c.status().message();
}

TEST_F(Faults, BadPlanIsRejectedBeforeAnyWorkerIsContacted) {
  ClusterConfig cfg;
  cfg.model_dir = *model_;
  // Nobody listens here: contacting them would fail as Disconnected, later.
  cfg.workers = {"inproc://nobody-0", "inproc://nobody-1"};
  cfg.auto_plan = false;
  for (const auto& plan : std::vector<std::vector<LayerRange>>{
           {{0, 1}, {2, 4}}, {{0, 3}, {2, 4}}, {{0, 4}}, {{0, 2}, {2, 5}}, {{0, 2}, {2, 2}}}) {
    cfg.plan = plan;
    zmq::context_t context(1);
    const auto start = Clock::now();
    auto c = Coordinator::Start(context, cfg);
    ASSERT_FALSE(c.ok()) << PlanText(plan);
    EXPECT_EQ(c.status().kind(), ErrorKind::kInvalid) << c.status().ToString();
    EXPECT_NE(c.status().message().find("plan"), std::string::npos) << c.status().message();
    EXPECT_LT(Clock::now() - start, std::chrono::milliseconds(500));
  }
}

TEST_F(Faults, UnreachableWorkerFailsTheHandshakeInBoundedTime) {
  InProcCluster cluster(1);
  ClusterConfig cfg = cluster.Config(*model_, {{0, 2}, {2, 4}}, 50, 4);
  cfg.workers.push_back("tcp://127.0.0.1:1");  // nothing listens on port 1
  cfg.insecure = true;                          // reachability, not keys, is tested here
  const auto start = Clock::now();
  auto c = Coordinator::Start(cluster.context(), cfg);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().kind(), ErrorKind::kDisconnected) << c.status().ToString();
  EXPECT_NE(c.status().message().find("tcp://127.0.0.1:1"), std::string::npos);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(3));
}

}  // namespace
}  // namespace lockstep::testing
