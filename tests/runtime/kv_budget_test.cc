// The worker's KV byte budget (Limits::kv_bytes_per_worker): a step or fork
// that would take the KV bytes of all sessions past it is refused with
// Overloaded naming the limit; nothing else changes (the refused session is
// usable once memory is free, the others never notice).
#include <gtest/gtest.h>

#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

class KvBudget : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("kv-budget", 4, 41)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override {
    ASSERT_TRUE(ops::PinFpEnvironment().ok());
    Result<OpenModel> m = OpenModelDir(*model_, ModelPins{});
    ASSERT_TRUE(m.ok()) << m.status().ToString();
    // Stages of 2 layers: K, pre-RoPE K and V per layer, plus the position.
    entry_bytes_ = 2 * uint64_t(m->config.num_kv_heads) * uint64_t(m->config.head_dim) * 3 * 4 + 8;
  }
  static void ExpectOverBudget(const Status& st, const std::string& what) {
    EXPECT_EQ(st.kind(), ErrorKind::kOverloaded) << st.ToString();
    EXPECT_NE(st.message().find("limit kv_bytes_per_worker"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  }
  static std::string* model_;
  uint64_t entry_bytes_ = 0;
};
std::string* KvBudget::model_ = nullptr;

TEST_F(KvBudget, PrefillsPastTheBudgetAreRefusedAndNothingElseChanges) {
  const uint64_t budget = entry_bytes_ * 10;  // 10 entries on stage 0
  InProcCluster cluster(2, [&](size_t i, WorkerOptions& o) {
    if (i == 0) o.limits.kv_bytes_per_worker = budget;
  });
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto a = (*c)->OpenSession(std::nullopt);
  auto b = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> logits;
  const std::vector<uint32_t> six = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE((*a)->Feed(six, &logits).ok());
  // 6 + 6 entries > 10: refused on the first stage before any work.
  Status st = (*b)->Feed(six, &logits);
  ExpectOverBudget(st, "over the limit of " + std::to_string(budget));
  EXPECT_NE(st.message().find("asks for " + std::to_string(12 * entry_bytes_)), std::string::npos)
      << st.message();
  EXPECT_EQ((*b)->CacheLength(), 0u);
  // A fork of a (6 more entries) does not fit either.
  auto fork = (*a)->Fork();
  ASSERT_TRUE(fork.ok());
  const uint32_t one[] = {7};
  ExpectOverBudget((*fork)->Feed(one, &logits), "fork of session");
  fork->reset();
  // a is untouched: it still decodes exactly as the monolithic run.
  DecodeRequest req;
  req.prompt = six;
  req.gen = 4;  // 6 + 3 entries
  a->reset();
  auto again = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(again.ok());
  auto r = RunDecode(**again, req, (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(*model_, req));
  again->reset();
  // With the memory free again, the refused session b is usable as it was.
  ASSERT_TRUE((*b)->Feed(six, &logits).ok());
  EXPECT_EQ((*b)->CacheLength(), 6u);
}

TEST_F(KvBudget, ALaterStageOverItsBudgetFailsOnlyThatSession) {
  InProcCluster cluster(2, [&](size_t i, WorkerOptions& o) {
    if (i == 1) o.limits.kv_bytes_per_worker = entry_bytes_ * 8;
  });
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto a = (*c)->OpenSession(std::nullopt);
  auto b = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(a.ok() && b.ok());
  std::vector<float> logits;
  const std::vector<uint32_t> five = {1, 2, 3, 4, 5};
  ASSERT_TRUE((*a)->Feed(five, &logits).ok());
  Status st = (*b)->Feed(five, &logits);
  ExpectOverBudget(st, "stage 1");
  // a goes on (5 + 3 = 8 entries fit).
  for (uint32_t t : {6u, 7u, 8u}) {
    const uint32_t tok[] = {t};
    ASSERT_TRUE((*a)->Feed(tok, &logits).ok());
  }
}

}  // namespace
}  // namespace lockstep::testing
