// Stages that are slow to load or to step (a large model on a slow or
// loaded host) are not taken for dead: a stage that loaded first is still
// heartbeaten while the others load, and a stage whose decode steps take
// longer than the coordinator's liveness window runs them on its compute
// thread, not inline on the thread that answers heartbeats. Each session
// decodes to its end, equal to its monolithic run.
#include <gtest/gtest.h>

#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

TEST(SlowStage, StepsLongerThanTheLivenessWindowDoNotSilenceTheWorker) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string model = MakeModel("slow_stage", 2, 31);
  // Each decode pass sleeps 400 ms; the coordinator gives up on a worker
  // after 4 x 50 ms = 200 ms without a word.
  InProcCluster cluster(2, [](size_t, WorkerOptions& o) {
    o.step_delay_for_testing = std::chrono::milliseconds(400);
  });
  DecodeRequest req;
  req.prompt = {5, 9, 2};
  req.gen = 4;
  {
    auto c = Coordinator::Start(cluster.context(),
                                cluster.Config(model, {{0, 1}, {1, 2}}, /*heartbeat_ms=*/50,
                                               /*liveness=*/4));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto session = (*c)->OpenSession(std::nullopt, req.sampling);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    Result<DecodeResult> got = RunDecode(**session, req, (*c)->seed());
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSameDecode(*got, Monolithic(model, req));
  }
}

TEST(SlowStage, AStageThatLoadedFirstStaysAliveWhileTheOthersLoad) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string model = MakeModel("slow_load", 2, 37);
  // The second stage takes 600 ms longer to load than the first; the
  // coordinator gives up on a worker after 4 x 50 ms = 200 ms without a word.
  InProcCluster cluster(2, [](size_t i, WorkerOptions& o) {
    if (i == 1) o.load_delay_for_testing = std::chrono::milliseconds(600);
  });
  DecodeRequest req;
  req.prompt = {7, 1, 8};
  req.gen = 3;
  {
    auto c = Coordinator::Start(cluster.context(),
                                cluster.Config(model, {{0, 1}, {1, 2}}, /*heartbeat_ms=*/50,
                                               /*liveness=*/4));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    auto session = (*c)->OpenSession(std::nullopt, req.sampling);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    Result<DecodeResult> got = RunDecode(**session, req, (*c)->seed());
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSameDecode(*got, Monolithic(model, req));
  }
}

}  // namespace
}  // namespace lockstep::testing
