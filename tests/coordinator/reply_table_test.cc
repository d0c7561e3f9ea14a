// ReplyTable on its own: which reply resolves which awaited step, what
// sticks, how relayed steps that come early are kept and handed out, and
// when replies expire. The cluster tests (Relay, Recovery, Sessions) show
// the same rules through a real pipeline.
#include "coordinator/reply_table.h"

#include <gtest/gtest.h>

#include <chrono>
#include <variant>

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = ReplyTable::Clock;
using Future = std::future<ReplyTable::ReplyResult>;

const Clock::time_point kT0 = Clock::now();
const Clock::time_point kLater = kT0 + 1h;

struct Awaited {
  ReplyTable::Promise promise = std::make_shared<std::promise<ReplyTable::ReplyResult>>();
  Future future = promise->get_future();
  bool ready() const { return future.wait_for(0s) == std::future_status::ready; }
};

wire::Logits LogitsOf(uint64_t session, uint32_t step) {
  return wire::Logits{session, step, 1, {0.5f}, {}};
}

wire::StepResult ResultOf(uint64_t session, uint32_t step, uint32_t token) {
  wire::StepResult r;
  r.session_id = session;
  r.step = step;
  r.token = token;
  return r;
}

uint32_t TokenOf(Future& f) {
  ReplyTable::ReplyResult r = f.get();
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return UINT32_MAX;
  const auto* got = std::get_if<wire::StepResult>(&*r);
  EXPECT_NE(got, nullptr);
  return got != nullptr ? got->token : UINT32_MAX;
}

TEST(ReplyTable, AReplyResolvesOnlyTheStepItNames) {
  ReplyTable t;
  Awaited a;
  t.Sent(7, 3, 0, kLater, a.promise);
  t.OnLogits(LogitsOf(7, 2));  // an older step's: stale
  t.OnLogits(LogitsOf(8, 3));  // another session's
  EXPECT_FALSE(a.ready());
  EXPECT_EQ(t.AwaitedStep(7), 3u);
  t.OnLogits(LogitsOf(7, 3));
  ASSERT_TRUE(a.ready());
  ReplyTable::ReplyResult r = a.future.get();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(std::get<wire::Logits>(*r).step, 3u);
  EXPECT_FALSE(t.awaiting());
}

TEST(ReplyTable, AnErrorNobodyAwaitsSticksAndTheFirstOneIsKept) {
  ReplyTable t;
  t.OnSessionError(4, InvalidError("first"));
  t.OnSessionError(4, CorruptError("second"));
  const Status st = t.TakeSticky(4);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(st.message(), "first");
  EXPECT_TRUE(t.TakeSticky(4).ok()) << "taken once";
  EXPECT_TRUE(t.TakeSticky(5).ok());
}

TEST(ReplyTable, AnErrorForAnAwaitedReplyFailsItAndDoesNotStick) {
  ReplyTable t;
  Awaited a;
  t.Sent(4, 0, 0, kLater, a.promise);
  t.OnSessionError(4, CorruptError("bad frame"));
  ASSERT_TRUE(a.ready());
  EXPECT_EQ(a.future.get().status().kind(), ErrorKind::kCorrupt);
  EXPECT_TRUE(t.TakeSticky(4).ok());
}

TEST(ReplyTable, AFailedFrameFailsOnlyAnAwaitedReply) {
  ReplyTable t;
  t.Fail(4, CorruptError("no one waits"));
  EXPECT_TRUE(t.TakeSticky(4).ok());
  Awaited a;
  t.Sent(4, 1, 0, kLater, a.promise);
  t.Fail(4, CorruptError("unparsable"));
  ASSERT_TRUE(a.ready());
  EXPECT_EQ(a.future.get().status().message(), "unparsable");
}

TEST(ReplyTable, RelayedStepsThatComeEarlyAreKeptInOrderUntilExpected) {
  ReplyTable t;
  Awaited first;
  t.Sent(9, 5, 3, kLater, first.promise);  // steps 6, 7, 8 relayed after 5
  t.OnStepResult(ResultOf(9, 6, 60));
  t.OnStepResult(ResultOf(9, 8, 80));  // out of turn (7 is missing): dropped
  t.OnStepResult(ResultOf(9, 5, 50));
  EXPECT_EQ(TokenOf(first.future), 50u);
  Result<std::optional<wire::StepResult>> six = t.TakeRelayed(9, 6);
  ASSERT_TRUE(six.ok() && six->has_value());
  EXPECT_EQ((*six)->token, 60u);
  Result<std::optional<wire::StepResult>> seven = t.TakeRelayed(9, 7);
  ASSERT_TRUE(seven.ok());
  EXPECT_FALSE(seven->has_value()) << "still to come";
  Awaited a7;
  t.Await(9, 7, kLater, a7.promise);
  t.OnStepResult(ResultOf(9, 7, 70));
  EXPECT_EQ(TokenOf(a7.future), 70u);
  EXPECT_TRUE(t.Relaying(9)) << "step 8 is still to come";
  Awaited a8;
  t.Await(9, 8, kLater, a8.promise);
  t.OnStepResult(ResultOf(9, 8, 80));
  EXPECT_EQ(TokenOf(a8.future), 80u);
  EXPECT_FALSE(t.Relaying(9)) << "the last relayed step ends the relay";
}

TEST(ReplyTable, OnlyStepsARequestAskedToRelayCanBeExpected) {
  ReplyTable t;
  Awaited a;
  t.Sent(2, 10, 2, kLater, a.promise);  // relays 11 and 12
  for (uint32_t step : {9u, 10u, 13u}) {
    const Status st = t.TakeRelayed(2, step).status();
    EXPECT_EQ(st.kind(), ErrorKind::kInvalid) << step;
    EXPECT_NE(st.message().find("step " + std::to_string(step) +
                                ": no request asked for it to be relayed"),
              std::string::npos)
        << st.message();
  }
  EXPECT_TRUE(t.TakeRelayed(2, 11).ok());
  EXPECT_EQ(t.TakeRelayed(3, 11).status().kind(), ErrorKind::kInvalid) << "another session";
}

TEST(ReplyTable, ARequestWithoutRelayOrAReleaseEndsTheRelay) {
  ReplyTable t;
  Awaited a, b;
  t.Sent(2, 10, 2, kLater, a.promise);
  t.Sent(2, 11, 0, kLater, b.promise);
  EXPECT_FALSE(t.Relaying(2));
  Awaited c;
  t.Sent(3, 0, 4, kLater, c.promise);
  t.OnSessionError(3, InvalidError("x"));  // resolves c
  t.OnSessionError(3, InvalidError("sticky"));
  t.Release(3);
  EXPECT_FALSE(t.Relaying(3));
  EXPECT_TRUE(t.TakeSticky(3).ok());
}

TEST(ReplyTable, RepliesPastTheirDeadlineExpireWithTheCallersReason) {
  ReplyTable t;
  Awaited soon, late;
  t.Sent(1, 0, 0, kT0 + 10ms, soon.promise);
  t.Sent(2, 4, 0, kT0 + 50ms, late.promise);
  EXPECT_EQ(t.NextDeadline(kLater), kT0 + 10ms);
  EXPECT_EQ(t.NextDeadline(kT0 + 5ms), kT0 + 5ms);
  const auto why = [](uint64_t s, uint32_t step) {
    return TimeoutError("session " + std::to_string(s) + " step " + std::to_string(step));
  };
  t.Expire(kT0 + 9ms, why);
  EXPECT_FALSE(soon.ready());
  t.Expire(kT0 + 10ms, why);
  ASSERT_TRUE(soon.ready());
  EXPECT_EQ(soon.future.get().status().message(), "session 1 step 0");
  EXPECT_FALSE(late.ready());
  EXPECT_EQ(t.NextDeadline(kLater), kT0 + 50ms);
  t.FailAll(DisconnectedError("gone"));
  ASSERT_TRUE(late.ready());
  EXPECT_EQ(late.future.get().status().kind(), ErrorKind::kDisconnected);
  EXPECT_FALSE(t.awaiting());
}

}  // namespace
}  // namespace lockstep
