// Sharded == monolithic for a Qwen3-MoE model (E3 + E4), bit for bit:
// every plan of its 4 layers over 2 and 3 in-process workers, with
// windows, evictions and sessions batched on the workers; and real worker
// processes over TCP loopback with the automatic plan.
#include <gtest/gtest.h>

#include <thread>

#include "cli_runner.h"
#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

SyntheticShape MoeShape() {
  SyntheticShape s;
  s.hidden = 64, s.layers = 4, s.heads = 4, s.kv_heads = 2, s.head_dim = 24, s.vocab = 320;
  s.untied = true, s.experts = 6, s.top_k = 2, s.moe_inter = 40, s.norm_topk = true;
  return s;
}

class MoeSharded : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("moe", MoeShape(), 29)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }

  static DecodeRequest Request(bool evicting) {
    DecodeRequest r;
    r.prompt = {5, 9, 100, 17, 3, 250, 41};
    r.gen = 10;
    if (evicting) r.evictions = {{1, 2, 0}, {3, 2, 6}};
    return r;
  }
  static std::string* model_;
};
std::string* MoeSharded::model_ = nullptr;

TEST_F(MoeSharded, EveryPlanOverTwoAndThreeWorkersMatchesMonolithic) {
  const DecodeResult plain = Monolithic(*model_, Request(false));
  const DecodeResult evicting = Monolithic(*model_, Request(true), 4);
  EXPECT_NE(plain.generated, evicting.generated);  // the requests differ in effect
  size_t plans = 0;
  for (const auto& plan : AllPartitions(4)) {
    if (plan.size() != 2 && plan.size() != 3) continue;
    ++plans;
    SCOPED_TRACE("plan " + PlanText(plan));
    // Two sessions in flight at once; the window makes each worker wait
    // for the other's step, so their rows share batched passes.
    InProcCluster cluster(plan.size(), [](size_t, WorkerOptions& o) {
      o.batch_window_for_testing = std::chrono::milliseconds(20);
    });
    uint64_t rows = 0;
    {
      auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, plan));
      ASSERT_TRUE(c.ok()) << c.status().ToString();
      auto a = (*c)->OpenSession(std::nullopt);
      auto b = (*c)->OpenSession(4);
      ASSERT_TRUE(a.ok() && b.ok());
      Result<DecodeResult> rb = InternalError("not run");
      std::thread other([&] {
        if (ops::PinFpEnvironment().ok()) rb = RunDecode(**b, Request(true), (*c)->seed());
      });
      auto ra = RunDecode(**a, Request(false), (*c)->seed());
      other.join();
      ASSERT_TRUE(ra.ok()) << ra.status().ToString();
      ASSERT_TRUE(rb.ok()) << rb.status().ToString();
      ExpectSameDecode(*ra, plain);
      ExpectSameDecode(*rb, evicting);
    }
    for (size_t i = 0; i < plan.size(); ++i) rows += cluster.worker(i).batched_rows();
    EXPECT_GT(rows, 0u);
  }
  EXPECT_EQ(plans, 6u);  // 0:1|1:4 0:2|2:4 0:3|3:4, and the three cuts into three
}

TEST_F(MoeSharded, WorkerProcessesWithTheAutomaticPlanMatchMonolithic) {
  const CliOutput o = RunCli({"run", "--model", *model_, "--ids", "5,9,100,17,3", "--gen", "8",
                              "--workers", "3", "--compare-monolithic"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("sharded == monolithic\n"), std::string::npos) << o.out;
}

}  // namespace
}  // namespace lockstep::testing
