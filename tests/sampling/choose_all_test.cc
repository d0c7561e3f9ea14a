// ChooseAndWitnessAll (engine/step_outcome.h) on a pool against each
// choice computed on its own from the parts it is defined by: ChooseToken,
// the one-shot Sha256 of the logits bytes, and WitnessChain::AddStep. Odd
// session counts and mixed vocabularies leave the pool's items uneven.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "base/sha256.h"
#include "engine/ops/fp_env.h"
#include "engine/ops/thread_pool.h"
#include "engine/step_outcome.h"

namespace lockstep {
namespace {

struct Session {
  SamplingParams params;
  std::unique_ptr<WitnessChain> chain, expected_chain;
  SamplingScratch scratch, expected_scratch;
  std::vector<float> logits;
};

std::vector<Session> MakeSessions(size_t n) {
  std::vector<Session> ss(n);
  const uint32_t prompt[] = {1, 2, 3};
  for (size_t i = 0; i < n; ++i) {
    WitnessSeed seed;
    seed.weights_sha256[0] = static_cast<uint8_t>(i);
    ss[i].chain = std::make_unique<WitnessChain>(seed, prompt);
    ss[i].expected_chain = std::make_unique<WitnessChain>(seed, prompt);
    if (i % 2 == 1) {  // odd sessions sample, even ones are greedy
      ss[i].params.temperature = 0.7f;
      ss[i].params.seed = 1000 + i;
      ss[i].params.top_k = i % 3 == 0 ? 0 : 40;
      ss[i].params.top_p = 0.9f;
    }
    ss[i].logits.resize(i % 3 == 2 ? 5 : 49152);
  }
  return ss;
}

void Fill(std::vector<float>& v, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (float& x : v) x = d(rng);
  v[v.size() / 2] = v[0];  // a tie
}

void ExpectAllEqualsOneByOne(size_t sessions, ops::ThreadPool* pool,
                             Grouping grouping = Grouping::kWhereLanesPay) {
  std::vector<Session> ss = MakeSessions(sessions);
  std::mt19937 rng(static_cast<uint32_t>(sessions));
  for (uint32_t step = 0; step < 3; ++step) {
    std::vector<StepOutcome> outs(sessions);
    std::vector<StepChoice> choices;
    for (size_t i = 0; i < sessions; ++i) {
      Fill(ss[i].logits, rng);
      choices.push_back({ss[i].logits, &ss[i].params, step, ss[i].chain.get(), &ss[i].scratch, &outs[i]});
    }
    ChooseAndWitnessAll(choices, pool, grouping);
    for (size_t i = 0; i < sessions; ++i) {
      const uint32_t token = ChooseToken(ss[i].logits, ss[i].params, step, &ss[i].expected_scratch);
      ss[i].expected_chain->AddStep(ss[i].logits, token);
      const Digest sha = Sha256(std::span<const uint8_t>(
          reinterpret_cast<const uint8_t*>(ss[i].logits.data()), ss[i].logits.size() * 4));
      EXPECT_EQ(outs[i].token, token) << "session " << i << " step " << step;
      EXPECT_EQ(outs[i].logits_sha256, sha) << "session " << i << " step " << step;
    }
  }
  for (size_t i = 0; i < sessions; ++i) {
    EXPECT_EQ(ss[i].chain->Finalize(), ss[i].expected_chain->Finalize()) << "session " << i;
  }
}

class ChooseAllTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }
};

TEST_F(ChooseAllTest, OnTwoThreadsEqualsEachChoiceOnItsOwn) {
  Result<std::unique_ptr<ops::ThreadPool>> pool = ops::ThreadPool::Create(2);
  ASSERT_TRUE(pool.ok());
  for (size_t n : {1, 2, 7, 8}) ExpectAllEqualsOneByOne(n, pool->get());
}

// The grouped path (up to four choices' eight digests fed together) on
// every CPU, not only where SHA-256 lanes pay: whole groups, a smaller last
// group, one choice left over.
TEST_F(ChooseAllTest, InGroupsEqualsEachChoiceOnItsOwn) {
  Result<std::unique_ptr<ops::ThreadPool>> pool = ops::ThreadPool::Create(2);
  ASSERT_TRUE(pool.ok());
  for (size_t n : {2, 5, 8, 11}) ExpectAllEqualsOneByOne(n, pool->get(), Grouping::kAlways);
  ExpectAllEqualsOneByOne(4, nullptr, Grouping::kAlways);
}

TEST_F(ChooseAllTest, WithoutAPoolEqualsEachChoiceOnItsOwn) {
  for (size_t n : {1, 3}) ExpectAllEqualsOneByOne(n, nullptr);
}

TEST_F(ChooseAllTest, ChooseAndWitnessIsTheOneChoiceCase) {
  std::vector<Session> ss = MakeSessions(2);
  std::mt19937 rng(5);
  for (Session& s : ss) {
    Fill(s.logits, rng);
    const StepOutcome o = ChooseAndWitness(s.logits, s.params, 0, s.chain.get(), &s.scratch);
    EXPECT_EQ(o.token, ChooseToken(s.logits, s.params, 0, &s.expected_scratch));
    s.expected_chain->AddStep(s.logits, o.token);
    EXPECT_EQ(s.chain->Finalize(), s.expected_chain->Finalize());
  }
}

}  // namespace
}  // namespace lockstep
