// Sharded == monolithic, bit for bit: every partition of a 4-layer model
// into 1..4 in-process stages, with and without windows and evictions.
#include <gtest/gtest.h>

#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

class ShardedEquivalence : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("equiv", 4, 7)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }

  static DecodeRequest Plain() {
    DecodeRequest r;
    r.prompt = {5, 9, 100, 17, 3};
    r.gen = 10;
    return r;
  }
  static DecodeRequest Evicting() {
    DecodeRequest r = Plain();
    r.evictions = {{1, 2, 0}, {0, 1, 4}, {3, 2, 7}};
    return r;
  }

  static std::string* model_;
};
std::string* ShardedEquivalence::model_ = nullptr;

Result<DecodeResult> Sharded(Coordinator& c, const DecodeRequest& req,
                             std::optional<int> window = std::nullopt) {
  LOCKSTEP_ASSIGN_OR_RETURN(auto session, c.OpenSession(window));
  return RunDecode(*session, req, c.seed());
}

TEST_F(ShardedEquivalence, EveryPartitionMatchesMonolithic) {
  const DecodeResult plain = Monolithic(*model_, Plain());
  const DecodeResult windowed = Monolithic(*model_, Plain(), 3);
  const DecodeResult evicting = Monolithic(*model_, Evicting());
  const DecodeResult both = Monolithic(*model_, Evicting(), 4);
  // The generator varies: a constant stream would prove nothing.
  EXPECT_NE(plain.generated, evicting.generated);
  const auto partitions = AllPartitions(4);
  ASSERT_EQ(partitions.size(), 8u);
  for (const auto& plan : partitions) {
    SCOPED_TRACE("plan " + PlanText(plan));
    InProcCluster cluster(plan.size());
    auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, plan));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ((*c)->plan_text(), PlanText(plan));
    auto r1 = Sharded(**c, Plain());
    ASSERT_TRUE(r1.ok()) << r1.status().ToString();
    ExpectSameDecode(*r1, plain);
    auto r2 = Sharded(**c, Plain(), 3);
    ASSERT_TRUE(r2.ok()) << r2.status().ToString();
    ExpectSameDecode(*r2, windowed);
    auto r3 = Sharded(**c, Evicting());
    ASSERT_TRUE(r3.ok()) << r3.status().ToString();
    ExpectSameDecode(*r3, evicting);
    auto r4 = Sharded(**c, Evicting(), 4);
    ASSERT_TRUE(r4.ok()) << r4.status().ToString();
    ExpectSameDecode(*r4, both);
  }
}

TEST_F(ShardedEquivalence, AutoPlanMatchesMonolithic) {
  InProcCluster cluster(3);
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto r = Sharded(**c, Plain());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(*model_, Plain()));
}

TEST_F(ShardedEquivalence, EvictionBeyondTheCacheIsRefusedLikeMonolithic) {
  InProcCluster cluster(2);
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  DecodeRequest req = Plain();
  req.evictions = {{4, 5, 0}};  // the cache holds 5 entries
  auto r = Sharded(**c, req);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kInvalid);
  // The session failed cleanly; the cluster keeps serving.
  auto ok = Sharded(**c, Plain());
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
}

}  // namespace
}  // namespace lockstep::testing
