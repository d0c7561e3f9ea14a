// The compute queue on its own (worker/compute_queue.h), with messages
// made by hand and no StageHost (a one-token TokenInput counts as a decode
// step): the order works keep, which decode steps run inline on the I/O
// thread, and how the compute thread batches them.
#include "worker/compute_queue.h"

#include <gtest/gtest.h>

#include <chrono>
#include <vector>

namespace lockstep {
namespace {

using std::chrono::milliseconds;

bool OneToken(const wire::Message& m) {
  auto* t = std::get_if<wire::TokenInput>(&m);
  return t != nullptr && t->token_ids.size() == 1;
}

ComputeWork Step(uint64_t session, uint32_t step = 0) {
  wire::TokenInput t;
  t.session_id = session;
  t.step = step;
  t.token_ids = {1};
  return ComputeWork{ComputeWork::Kind::kMessage, t, 0, {}};
}

ComputeWork Open(uint64_t session) {
  wire::SessionOpen o;
  o.session_id = session;
  return ComputeWork{ComputeWork::Kind::kMessage, o, 0, {}};
}

// "session/step" of each work (0/0 for one that is not a TokenInput).
std::vector<std::string> Names(const std::vector<ComputeWork>& works) {
  std::vector<std::string> names;
  for (const ComputeWork& w : works) {
    auto* t = std::get_if<wire::TokenInput>(&w.message);
    names.push_back(t ? std::to_string(t->session_id) + "/" + std::to_string(t->step) : "other");
  }
  return names;
}

using NameList = std::vector<std::string>;

TEST(ComputeQueue, TheFirstPassAndLongPassesRunOnTheComputeThread) {
  ComputeQueue q(OneToken, 4, milliseconds(0));
  EXPECT_FALSE(q.CanRunInline(Step(1))) << "no pass yet: of unknown length";
  q.RecordPass(milliseconds(1));
  EXPECT_TRUE(q.CanRunInline(Step(1)));
  EXPECT_FALSE(q.CanRunInline(Open(1))) << "only decode steps run inline";
  EXPECT_FALSE(q.CanRunInline(ComputeWork{ComputeWork::Kind::kFail, {}, 1, InvalidError("x")}));
  q.RecordPass(ComputeQueue::kMaxInlineStep);
  EXPECT_TRUE(q.CanRunInline(Step(1))) << "up to the bound itself";
  q.RecordPass(ComputeQueue::kMaxInlineStep + std::chrono::nanoseconds(1));
  EXPECT_FALSE(q.CanRunInline(Step(1))) << "a long pass would hold heartbeats back";
}

TEST(ComputeQueue, NothingRunsInlineWhileTheComputeThreadHasWork) {
  ComputeQueue q(OneToken, 4, milliseconds(0));
  q.RecordPass(milliseconds(1));
  q.Enqueue(Open(1));
  q.Submit(Step(2));
  EXPECT_EQ(q.held(), 0u) << "queued behind the open";
  std::vector<ComputeWork> works;
  ASSERT_TRUE(q.Take(milliseconds(0), &works));
  EXPECT_EQ(Names(works), (NameList{"other"}));
  ASSERT_TRUE(q.Take(milliseconds(0), &works));
  EXPECT_EQ(Names(works), (NameList{"2/0"}));
  q.Done(1);
  EXPECT_FALSE(q.CanRunInline(Step(3))) << "one work still not applied";
  q.Done(1);
  EXPECT_TRUE(q.CanRunInline(Step(3))) << "idle: the I/O thread may use the host";
}

TEST(ComputeQueue, ABatchWindowKeepsEveryStepOnTheComputeThread) {
  ComputeQueue q(OneToken, 4, milliseconds(5));
  q.RecordPass(milliseconds(1));
  EXPECT_FALSE(q.CanRunInline(Step(1)));
}

TEST(ComputeQueue, HeldStepsGoFirstAndAtMostABatchOfThemIsHeld) {
  ComputeQueue q(OneToken, 2, milliseconds(0));
  q.RecordPass(milliseconds(1));
  q.Submit(Step(1, 0));
  q.Submit(Step(2, 0));
  EXPECT_EQ(q.held(), 2u);
  q.Submit(Step(1, 1));  // a third would pass the batch: everything goes to the queue
  EXPECT_EQ(q.held(), 0u);
  std::vector<ComputeWork> works;
  ASSERT_TRUE(q.Take(milliseconds(0), &works));
  EXPECT_EQ(Names(works), (NameList{"1/0", "2/0"})) << "at most max_batch steps a pass";
  ASSERT_TRUE(q.Take(milliseconds(0), &works));
  EXPECT_EQ(Names(works), (NameList{"1/1"}));
  EXPECT_FALSE(q.Take(milliseconds(0), &works));
}

TEST(ComputeQueue, TheIoThreadTakesWhatItHeldInArrivalOrder) {
  ComputeQueue q(OneToken, 4, milliseconds(0));
  q.RecordPass(milliseconds(1));
  q.Submit(Step(1));
  q.Submit(Step(2));
  std::vector<ComputeWork> works = {Open(9)};
  q.TakeHeld(&works);
  EXPECT_EQ(Names(works), (NameList{"1/0", "2/0"}));
  EXPECT_EQ(q.held(), 0u);
}

TEST(ComputeQueue, AnotherWorkEndsARunOfDecodeStepsAndIsTakenAfterIt) {
  ComputeQueue q(OneToken, 8, milliseconds(0));
  q.Enqueue(Step(1));
  q.Enqueue(Step(2));
  q.Enqueue(Open(3));
  q.Enqueue(Step(4));
  std::vector<ComputeWork> works;
  ASSERT_TRUE(q.Take(milliseconds(0), &works));
  EXPECT_EQ(Names(works), (NameList{"1/0", "2/0", "other"}));
  ASSERT_TRUE(q.Take(milliseconds(0), &works));
  EXPECT_EQ(Names(works), (NameList{"4/0"}));
  q.Enqueue(Open(5));
  q.Enqueue(Step(6));
  ASSERT_TRUE(q.Take(milliseconds(0), &works));
  EXPECT_EQ(Names(works), (NameList{"other"})) << "a run starts only with a decode step";
}

TEST(ComputeQueue, APassHoldsDistinctSessionsUpToTheBatch) {
  const wire::Message a = Step(1).message, b = Step(2).message, a2 = Step(1, 1).message;
  std::vector<const wire::Message*> batch = {&a};
  EXPECT_FALSE(ComputeQueue::MustFlushBefore(batch, b, 2));
  EXPECT_TRUE(ComputeQueue::MustFlushBefore(batch, a2, 2)) << "one session's steps stay in order";
  batch.push_back(&b);
  EXPECT_TRUE(ComputeQueue::MustFlushBefore(batch, Step(3).message, 2)) << "full";
  EXPECT_FALSE(ComputeQueue::MustFlushBefore({}, a, 1));
}

}  // namespace
}  // namespace lockstep
