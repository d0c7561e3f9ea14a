// Traced sessions on a pipeline whose peers lie about the per-layer
// digests: a stage refuses a hidden frame with the wrong number of them (or
// any, for an untraced session), the coordinator refuses a last stage's
// answer with the wrong number; only that session fails, and a traced
// session on honest workers equals the traced monolithic decode.
#include <gtest/gtest.h>

#include <atomic>

#include "engine/local_backend.h"
#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"
#include "wire/messages.h"

namespace lockstep::testing {
namespace {

class TracedPipeline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("trace", 4, 13)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }

  static DecodeRequest Request() {
    DecodeRequest r;
    r.prompt = {5, 9, 100, 17};
    r.gen = 6;
    return r;
  }
  static Result<DecodeResult> Sharded(Coordinator& c, bool trace) {
    LOCKSTEP_ASSIGN_OR_RETURN(auto session, c.OpenSession(std::nullopt, {}, trace));
    return RunDecode(*session, Request(), c.seed());
  }
  // Worker `who`'s frames of kind T (to the next stage, or the
  // coordinator) pass through `mutate` while armed.
  template <typename T>
  static void Run(size_t who, const std::function<void(T&)>& mutate, bool trace,
                  const char* expect, ErrorKind kind) {
    std::atomic<bool> armed{false};
    InProcCluster cluster(3, [&](size_t i, WorkerOptions& o) {
      if (i != who) return;
      auto hook = [&](std::vector<uint8_t>& f) {
        Result<wire::Message> m = wire::ParseMessage(f);
        if (!armed.load() || !m.ok() || !std::holds_alternative<T>(*m)) return;
        T t = std::get<T>(*m);
        mutate(t);
        f = wire::MarshalMessage(t);  // a valid frame, digests recomputed
      };
      o.transport.mutate_outgoing_for_testing = hook;
      o.next_hop_transport.mutate_outgoing_for_testing = hook;
    });
    auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 1}, {1, 3}, {3, 4}}));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    armed = true;
    auto bad = Sharded(**c, trace);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().kind(), kind) << bad.status().ToString();
    EXPECT_NE(bad.status().message().find(expect), std::string::npos) << bad.status().message();
    armed = false;  // only that session failed
    auto good = Sharded(**c, true);
    ASSERT_TRUE(good.ok()) << good.status().ToString();
    EXPECT_EQ(good->layer_digests, MonolithicTrace());
  }
  static std::vector<std::vector<Digest>> MonolithicTrace() {
    auto model = OpenModelDir(*model_, ModelPins{});
    EXPECT_TRUE(model.ok());
    auto stage = LoadStage(*model, StageSpec{0, 4, true, true}, ComputeOptions{"scalar"});
    EXPECT_TRUE(stage.ok());
    LocalBackend b(*stage->stage);
    b.EnableTrace();
    auto r = RunDecode(b, Request(), model->Seed());
    EXPECT_TRUE(r.ok());
    EXPECT_EQ(r->layer_digests.size(), 6u);
    return r->layer_digests;
  }

  static std::string* model_;
};
std::string* TracedPipeline::model_ = nullptr;

TEST_F(TracedPipeline, HiddenFrameMissingADigestIsRefusedByTheNextStage) {
  Run<wire::HiddenFrame>(1, [](wire::HiddenFrame& h) { h.layer_digests.pop_back(); }, true,
                         "hidden frame carries 2 layer digests, expected 3", ErrorKind::kInvalid);
}

TEST_F(TracedPipeline, DigestsOnAnUntracedSessionAreRefused) {
  Run<wire::HiddenFrame>(
      0, [](wire::HiddenFrame& h) { h.layer_digests.push_back(Digest{}); }, false,
      "hidden frame carries 1 layer digests, expected 0 (the session is not traced)",
      ErrorKind::kInvalid);
}

TEST_F(TracedPipeline, StepResultWithTooFewDigestsIsCorrupt) {
  Run<wire::StepResult>(2, [](wire::StepResult& r) { r.layer_digests.resize(1); }, true,
                        "the last stage sent 1 layer digests, expected 4", ErrorKind::kCorrupt);
}

}  // namespace
}  // namespace lockstep::testing
