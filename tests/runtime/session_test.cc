// Sessions on one cluster: several at once (pipelined across stages) equal
// their solo runs; a forked session continues exactly like its source.
#include <gtest/gtest.h>

#include <cstring>
#include <thread>

#include "engine/local_backend.h"
#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

class Sessions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("sessions", 4, 11)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }
  static std::string* model_;
};
std::string* Sessions::model_ = nullptr;

DecodeRequest Request(uint32_t seed) {
  DecodeRequest r;
  for (uint32_t i = 0; i < 3 + seed % 4; ++i) r.prompt.push_back((seed * 37 + i * 101) % 512);
  r.gen = 12;
  if (seed % 2) r.evictions = {{0, 2, 3}};
  return r;
}

TEST_F(Sessions, ConcurrentSessionsEqualTheirSoloRuns) {
  constexpr int kSessions = 6;
  std::vector<DecodeResult> solo;
  for (int s = 0; s < kSessions; ++s) solo.push_back(Monolithic(*model_, Request(s)));
  InProcCluster cluster(3);
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 1}, {1, 3}, {3, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<Result<DecodeResult>> got(kSessions, Result<DecodeResult>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int s = 0; s < kSessions; ++s) {
    threads.emplace_back([&, s] {
      if (!ops::PinFpEnvironment().ok()) return;  // argmax reads floats here
      auto session = (*c)->OpenSession(s % 3 == 0 ? std::optional<int>(4) : std::nullopt);
      if (!session.ok()) return;
      got[s] = RunDecode(**session, Request(s), (*c)->seed());
    });
  }
  for (auto& t : threads) t.join();
  for (int s = 0; s < kSessions; ++s) {
    SCOPED_TRACE("session " + std::to_string(s));
    ASSERT_TRUE(got[s].ok()) << got[s].status().ToString();
    const DecodeResult want =
        s % 3 == 0 ? Monolithic(*model_, Request(s), 4) : solo[static_cast<size_t>(s)];
    ExpectSameDecode(*got[s], want);
  }
}

TEST_F(Sessions, ForkContinuesLikeTheSourceAndLikeMonolithic) {
  Result<OpenModel> model = OpenModelDir(*model_, ModelPins{});
  ASSERT_TRUE(model.ok());
  auto stage = LoadStage(*model, {0, 4, true, true}, ComputeOptions{"scalar"});
  ASSERT_TRUE(stage.ok());
  LocalBackend local(**stage);
  InProcCluster cluster(2);
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 3}, {3, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto source = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(source.ok());
  const uint32_t prompt[] = {4, 8, 15, 16, 23, 42};
  std::vector<float> want, got;
  ASSERT_TRUE(local.Feed(prompt, &want).ok());
  ASSERT_TRUE((*source)->Feed(prompt, &got).ok());
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4));
  auto fork = (*source)->Fork();
  ASSERT_TRUE(fork.ok());
  EXPECT_EQ((*fork)->CacheLength(), 6u);
  // The fork and the source take different next tokens; each must equal a
  // monolithic clone of the prefix fed that token.
  for (uint32_t token : {7u, 99u}) {
    LocalBackend branch(**stage, local.cache().Clone());
    const uint32_t one[1] = {token};
    std::vector<float> expect, from_fork;
    ASSERT_TRUE(branch.Feed(one, &expect).ok());
    StepBackend& remote = token == 7 ? static_cast<StepBackend&>(**fork) : **source;
    ASSERT_TRUE(remote.Feed(one, &from_fork).ok());
    ASSERT_EQ(expect.size(), from_fork.size());
    EXPECT_EQ(0, std::memcmp(expect.data(), from_fork.data(), expect.size() * 4))
        << "token " << token;
  }
}

TEST_F(Sessions, ReleasedSessionIsGoneOnTheWorkers) {
  InProcCluster cluster(2);
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto session = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  const uint64_t id = (*session)->id();
  const uint32_t prompt[] = {1, 2};
  std::vector<float> logits;
  ASSERT_TRUE((*session)->Feed(prompt, &logits).ok());
  session->reset();  // Release
  // A request on the released id is refused by the first stage.
  wire::TokenInput in;
  in.session_id = id;
  in.step = 9;
  in.first_position = 2;
  in.token_ids = {3};
  auto reply = (*c)->Request(id, 9, wire::MarshalMessage(in));
  ASSERT_EQ(reply.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  auto r = reply.get();
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("unknown session"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("stage 0"), std::string::npos) << r.status().ToString();
}

// A session thread runs the coordinator's I/O loop while it waits for its
// reply; once no session steps, the I/O thread must take the loop back, or
// heartbeats would stop and the workers would drop the sessions.
TEST_F(Sessions, TheIoThreadTakesTheLoopBackWhenNoSessionSteps) {
  InProcCluster cluster(2);
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto session = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  const uint32_t prompt[] = {1, 2, 3};
  std::vector<float> logits;
  ASSERT_TRUE((*session)->Feed(prompt, &logits).ok());
  const uint64_t before = (*c)->stats().frames_received;
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // 10 heartbeats of 50 ms
  // Both workers answered most of them: someone ran the loop meanwhile.
  EXPECT_GE((*c)->stats().frames_received, before + 2 * 5);
  // Steps still go through, whoever runs the loop when they start.
  for (uint32_t token : {4u, 5u, 6u}) {
    const uint32_t one[] = {token};
    ASSERT_TRUE((*session)->Feed(one, &logits).ok());
  }
  EXPECT_TRUE((*c)->health().ok());
}

}  // namespace
}  // namespace lockstep::testing
