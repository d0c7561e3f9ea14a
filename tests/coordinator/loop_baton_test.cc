// LoopBaton on its own: one holder at a time; a session thread that finds
// the loop taken is counted waiting and keeps the I/O thread on it; the
// I/O thread takes the loop back at once when asked, else only after the
// hand-back time; Stop() frees it at once. (Sessions.TheIoThreadTakesThe-
// LoopBackWhenNoSessionSteps shows the same inside a coordinator.)
#include "coordinator/loop_baton.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <thread>

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = LoopBaton::Clock;

// How long TakeForIoThread blocked, taken on another thread.
std::future<Clock::duration> IoThreadTakes(LoopBaton& baton) {
  return std::async(std::launch::async, [&baton] {
    const auto t0 = Clock::now();
    baton.TakeForIoThread();
    return Clock::now() - t0;
  });
}

TEST(LoopBaton, OneHolderAtATime) {
  LoopBaton baton(10s);
  EXPECT_TRUE(baton.TakeForSession());
  EXPECT_FALSE(baton.TakeForSession()) << "a second session thread waits";
  baton.DoneWaiting();
  baton.LetGoFromSession(false);
  EXPECT_TRUE(baton.TakeForSession()) << "free again";
}

TEST(LoopBaton, TheIoThreadStartsWithTheLoopAndKeepsItWhileASessionWaits) {
  LoopBaton baton(10s);
  EXPECT_LT(IoThreadTakes(baton).get(), 5s) << "the first take is at once";
  EXPECT_FALSE(baton.TakeForSession());
  EXPECT_FALSE(baton.LetGoFromIoThread()) << "a session thread waits for a reply";
  baton.DoneWaiting();
  EXPECT_TRUE(baton.LetGoFromIoThread());
  EXPECT_TRUE(baton.TakeForSession());
}

TEST(LoopBaton, WithNothingUrgentTheIoThreadWaitsTheHandBackTime) {
  LoopBaton baton(200ms);
  baton.TakeForIoThread();
  ASSERT_TRUE(baton.LetGoFromIoThread());
  ASSERT_TRUE(baton.TakeForSession());
  std::future<Clock::duration> io = IoThreadTakes(baton);
  EXPECT_EQ(io.wait_for(50ms), std::future_status::timeout) << "a session holds the loop";
  const auto released = Clock::now();
  baton.LetGoFromSession(false);
  const Clock::duration blocked = io.get();
  EXPECT_GE(Clock::now() - released, 200ms) << "taken back only after the hand-back time";
  EXPECT_GT(blocked, 200ms);
}

TEST(LoopBaton, AnUrgentLetGoHandsTheLoopBackAtOnce) {
  LoopBaton baton(10s);
  baton.TakeForIoThread();
  ASSERT_TRUE(baton.LetGoFromIoThread());
  ASSERT_TRUE(baton.TakeForSession());
  std::future<Clock::duration> io = IoThreadTakes(baton);
  std::this_thread::sleep_for(20ms);
  baton.LetGoFromSession(/*urgent=*/true);
  EXPECT_EQ(io.wait_for(5s), std::future_status::ready) << "not the 10 s hand-back";
}

TEST(LoopBaton, ASessionWaitingMakesTheLetGoUrgent) {
  LoopBaton baton(10s);
  baton.TakeForIoThread();
  ASSERT_TRUE(baton.LetGoFromIoThread());
  ASSERT_TRUE(baton.TakeForSession());
  ASSERT_FALSE(baton.TakeForSession());  // another session thread waits
  std::future<Clock::duration> io = IoThreadTakes(baton);
  baton.LetGoFromSession(false);
  EXPECT_EQ(io.wait_for(5s), std::future_status::ready);
  baton.DoneWaiting();
}

TEST(LoopBaton, StopFreesTheIoThreadAtOnceAndNoSessionTakesTheLoopAfter) {
  LoopBaton baton(10s);
  baton.TakeForIoThread();
  ASSERT_TRUE(baton.LetGoFromIoThread());  // released just now: 10 s to wait
  std::future<Clock::duration> io = IoThreadTakes(baton);
  std::this_thread::sleep_for(20ms);
  baton.Stop();
  EXPECT_EQ(io.wait_for(5s), std::future_status::ready);
  baton.Drop();
  EXPECT_FALSE(baton.TakeForSession());
  baton.DoneWaiting();
}

}  // namespace
}  // namespace lockstep
