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

// Decodes a short request on two in-process workers set up by `slow`,
// with a coordinator that gives up on a worker after 4 x 50 ms = 200 ms
// without a word, and compares it with the monolithic run.
void ExpectDecodeOnSlowCluster(const std::string& model,
                               const std::function<void(size_t, WorkerOptions&)>& slow) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  InProcCluster cluster(2, slow);
  DecodeRequest req;
  req.prompt = {5, 9, 2};
  req.gen = 4;
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

TEST(SlowStage, StepsLongerThanTheLivenessWindowDoNotSilenceTheWorker) {
  ExpectDecodeOnSlowCluster(MakeModel("slow_stage", 2, 31), [](size_t, WorkerOptions& o) {
    o.step_delay_for_testing = std::chrono::milliseconds(400);  // every decode pass
  });
}

TEST(SlowStage, AStageThatLoadedFirstStaysAliveWhileTheOthersLoad) {
  ExpectDecodeOnSlowCluster(MakeModel("slow_load", 2, 37), [](size_t i, WorkerOptions& o) {
    if (i == 1) o.load_delay_for_testing = std::chrono::milliseconds(600);
  });
}

}  // namespace
}  // namespace lockstep::testing
