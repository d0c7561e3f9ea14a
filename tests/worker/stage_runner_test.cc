// The runner on its own (worker/stage_runner.h), over the first stage of
// tiny-llama (tests/runtime/stage_host_fixture.h) with no socket: decode
// steps of distinct sessions run as one pass, a session's steps never
// share one, another work first runs the pending batch, what each work or
// pass produced is published in order, a pass's time reaches the queue,
// and kStop ends the run.
#include "worker/stage_runner.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/runtime/stage_host_fixture.h"

namespace lockstep::testing {
namespace {

using std::chrono::milliseconds;

class StageRunnerTest : public TwoStages {
 protected:
  void SetUp() override {
    TwoStages::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    Open(7, 8);
    Open(8, 8);
  }

  // A decode step of `session` at `position` (first stage: one token).
  static ComputeWork Step(uint64_t session, uint32_t position) {
    wire::TokenInput t;
    t.session_id = session;
    t.step = position;
    t.first_position = position;
    t.token_ids = {static_cast<uint32_t>(3 + position)};
    return ComputeWork{ComputeWork::Kind::kMessage, t, 0, {}};
  }
  StageRunner Runner() {
    return StageRunner(
        first_, queue_, {},
        [this](std::vector<Outgoing>* out) {
          ++publishes_;
          for (Outgoing& o : *out) {
            const char* kind = o.to == Outgoing::To::kNextStage ? "next" : "coordinator";
            sent_.push_back(std::string(kind) + " " + std::to_string(o.session_id) + "/" +
                            std::to_string(o.step));
            pool_.Give(std::move(o.frame));
          }
        },
        [](const std::string&) {});
  }

  ComputeQueue queue_{[this](const wire::Message& m) { return first_.IsDecodeStep(m); }, 16,
                      milliseconds(0)};
  int publishes_ = 0;
  std::vector<std::string> sent_;
};

using Sent = std::vector<std::string>;

TEST_F(StageRunnerTest, DistinctSessionsStepInOnePassAndPublishInOrder) {
  StageRunner runner = Runner();
  std::vector<ComputeWork> works = {Step(7, 0), Step(8, 0)};
  EXPECT_FALSE(queue_.CanRunInline(Step(7, 1))) << "no pass has run yet";
  ASSERT_TRUE(runner.Run(works));
  EXPECT_EQ(first_.batched_steps(), 1u);
  EXPECT_EQ(first_.batched_rows(), 2u);
  EXPECT_EQ(publishes_, 1) << "one pass, published once";
  EXPECT_EQ(sent_, (Sent{"next 7/0", "next 8/0"}));
  EXPECT_TRUE(queue_.CanRunInline(Step(7, 1))) << "the pass's time reached the queue";
}

TEST_F(StageRunnerTest, ASessionsStepsNeverShareAPass) {
  StageRunner runner = Runner();
  std::vector<ComputeWork> works = {Step(7, 0), Step(7, 1), Step(8, 0)};
  ASSERT_TRUE(runner.Run(works));
  EXPECT_EQ(sent_, (Sent{"next 7/0", "next 7/1", "next 8/0"}));
  EXPECT_EQ(first_.batched_steps(), 1u) << "7/0 alone, then 7/1 with 8/0";
  EXPECT_EQ(publishes_, 2);
}

TEST_F(StageRunnerTest, AnotherWorkRunsThePendingBatchFirst) {
  StageRunner runner = Runner();
  wire::Release release;
  release.session_id = 8;
  std::vector<ComputeWork> works = {
      Step(7, 0), Step(8, 0), ComputeWork{ComputeWork::Kind::kMessage, release, 0, {}},
      ComputeWork{ComputeWork::Kind::kFail, {}, 7, CorruptError("flipped bit")}};
  ASSERT_TRUE(runner.Run(works));
  EXPECT_EQ(sent_, (Sent{"next 7/0", "next 8/0", "next 8/0", "coordinator 7/0"}))
      << "the batch, the release forwarded, then the failure reported";
  EXPECT_EQ(first_.session_count(), 1u);
  EXPECT_EQ(publishes_, 3);
}

TEST_F(StageRunnerTest, StopEndsTheRunBeforeTheWorksAfterIt) {
  StageRunner runner = Runner();
  std::vector<ComputeWork> works = {ComputeWork{ComputeWork::Kind::kStop, {}, 0, {}},
                                    Step(7, 0)};
  EXPECT_FALSE(runner.Run(works));
  EXPECT_TRUE(sent_.empty());
  works = {ComputeWork{ComputeWork::Kind::kDropSessions, {}, 0, {}}};
  ASSERT_TRUE(runner.Run(works));
  EXPECT_EQ(first_.session_count(), 0u);
}

}  // namespace
}  // namespace lockstep::testing
