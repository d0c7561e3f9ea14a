// One decode engine: a DecodeSession stepped alone with its prompt in
// chunks, stepped in a batch by the in-process LocalBatchStepper, or in a
// batch on a cluster by ClusterBatchStepper, gives its solo RunDecode bit
// for bit (runtime::CompareResults: tokens, every step's logits digest,
// the chain). The oracle is the monolithic RunDecode (Monolithic), which
// the conformance vectors pin independently.
#include <gtest/gtest.h>

#include "engine/batch_stepper.h"
#include "engine/decode_session.h"
#include "engine/local_backend.h"
#include "engine/ops/fp_env.h"
#include "runtime/bench.h"
#include "runtime/cluster_stepper.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

class DecodeSessionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("session_engine", 3, 29)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }

  // Plain, evicting, windowed, sampled, and one whose prompt spans chunks.
  static std::vector<DecodeRequest> Requests() {
    std::vector<DecodeRequest> reqs(5);
    for (size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].prompt = {5, 9, static_cast<uint32_t>(100 + i), 17, 3};
      reqs[i].gen = 7;
    }
    reqs[1].evictions = {{1, 2, 0}, {0, 1, 4}};
    reqs[2].window = 3;
    reqs[3].sampling.temperature = 0.9f;
    reqs[3].sampling.seed = 11;
    reqs[4].prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    return reqs;
  }
  static std::string* model_;
};
std::string* DecodeSessionTest::model_ = nullptr;

TEST_F(DecodeSessionTest, ChunkedPromptEqualsRunDecode) {
  auto model = OpenModelDir(*model_, ModelPins{});
  ASSERT_TRUE(model.ok());
  auto stage = LoadStage(*model, {0, model->config.num_layers, true, true}, ComputeOptions{});
  ASSERT_TRUE(stage.ok());
  for (const DecodeRequest& req : Requests()) {
    LocalBackend backend(**stage, req.prompt.size() + req.gen);
    if (req.window) {
      ASSERT_TRUE(backend.SetWindow(*req.window).ok());
    }
    DecodeSession s(backend, req, model->Seed());
    while (!s.done()) ASSERT_TRUE(s.Step(2).ok());
    EXPECT_EQ(s.end(), DecodeSession::End::kLength);
    ExpectSameDecode(s.result(), Monolithic(*model_, req, req.window));
  }
}

TEST_F(DecodeSessionTest, EosStopsTheSessionAfterItsToken) {
  const DecodeRequest req = Requests()[0];
  const DecodeResult full = Monolithic(*model_, req);
  auto model = OpenModelDir(*model_, ModelPins{});
  ASSERT_TRUE(model.ok());
  auto stage = LoadStage(*model, {0, model->config.num_layers, true, true}, ComputeOptions{});
  ASSERT_TRUE(stage.ok());
  LocalBackend backend(**stage, req.prompt.size() + req.gen);
  DecodeSession s(backend, req, model->Seed(), StopRule{{full.generated[2]}, {}});
  while (!s.done()) ASSERT_TRUE(s.Step().ok());
  EXPECT_EQ(s.end(), DecodeSession::End::kStop);
  const size_t first = static_cast<size_t>(
      std::find(full.generated.begin(), full.generated.end(), full.generated[2]) -
      full.generated.begin());
  ASSERT_EQ(s.steps(), first + 1);
  const DecodeResult got = s.result();
  EXPECT_TRUE(std::equal(got.generated.begin(), got.generated.end(), full.generated.begin()));
  EXPECT_TRUE(std::equal(got.logits_sha256.begin(), got.logits_sha256.end(),
                         full.logits_sha256.begin()));
}

TEST_F(DecodeSessionTest, InProcessBatchEqualsSoloRuns) {
  auto model = OpenModelDir(*model_, ModelPins{});
  ASSERT_TRUE(model.ok());
  auto stage = LoadStage(*model, {0, model->config.num_layers, true, true}, ComputeOptions{});
  ASSERT_TRUE(stage.ok());
  const std::vector<DecodeRequest> reqs = Requests();
  for (size_t chunk : {size_t{3}, size_t{64}}) {
    auto got = runtime::DecodeBatched(**stage, model->Seed(), reqs, chunk);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (size_t i = 0; i < reqs.size(); ++i) {
      SCOPED_TRACE("chunk " + std::to_string(chunk) + " request " + std::to_string(i));
      ExpectSameDecode((*got)[i], Monolithic(*model_, reqs[i], reqs[i].window));
    }
  }
}

TEST_F(DecodeSessionTest, ClusterBatchEqualsSoloRuns) {
  InProcCluster cluster(2);
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 1}, {1, 3}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::vector<DecodeRequest> reqs = Requests();
  std::vector<std::unique_ptr<RemoteSession>> remotes;
  std::vector<std::unique_ptr<DecodeSession>> sessions;
  std::vector<DecodeSession*> batch;
  for (const DecodeRequest& r : reqs) {
    auto open = (*c)->OpenSession(r.window, r.sampling, false,
                                  static_cast<uint32_t>(r.prompt.size() + r.gen));
    ASSERT_TRUE(open.ok()) << open.status().ToString();
    remotes.push_back(std::move(*open));
    sessions.push_back(std::make_unique<DecodeSession>(*remotes.back(), r, (*c)->seed()));
    batch.push_back(sessions.back().get());
  }
  runtime::ClusterBatchStepper stepper;
  std::vector<Status> status(batch.size());
  for (int turns = 0; turns < 100 && !std::all_of(batch.begin(), batch.end(),
                                                  [](DecodeSession* s) { return s->done(); });
       ++turns) {
    stepper.Step(batch, 4, status);
    for (const Status& st : status) ASSERT_TRUE(st.ok()) << st.ToString();
  }
  for (size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_TRUE(sessions[i]->done());
    ExpectSameDecode(sessions[i]->result(), Monolithic(*model_, reqs[i], reqs[i].window));
  }
  sessions.clear();
  remotes.clear();
}

}  // namespace
}  // namespace lockstep::testing
