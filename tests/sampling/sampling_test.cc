// engine/sampling.h against hand-derived cases: the greedy path is CIS-2's
// argmax, the uniform is the published SplitMix64 sequence, and small
// distributions whose choice follows from u by hand. reference.py checks
// the general case against an independent transcription.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "engine/ops/fp_env.h"
#include "engine/ops/kernels.h"
#include "engine/sampling.h"

namespace lockstep {
namespace {

class SamplingTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }
  SamplingScratch scratch_;
};

SamplingParams Sampled(float t, uint64_t seed, uint32_t top_k = 0, float top_p = 1) {
  SamplingParams p;
  p.temperature = t;
  p.seed = seed;
  p.top_k = top_k;
  p.top_p = top_p;
  return p;
}

TEST_F(SamplingTest, UniformIsPublishedSplitMix64Sequence) {
  // SplitMix64 seeded with 0 outputs 0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4,
  // 0x06C45D188009454F (Vigna's reference splitmix64.c); u is the top 24 bits.
  EXPECT_EQ(SamplingUniform(0, 0), static_cast<float>(0xE220A8) / 16777216.0f);
  EXPECT_EQ(SamplingUniform(0, 1), static_cast<float>(0x6E789E) / 16777216.0f);
  EXPECT_EQ(SamplingUniform(0, 2), static_cast<float>(0x06C45D) / 16777216.0f);
}

TEST_F(SamplingTest, GreedyIsArgmaxWithLowestIdOnTies) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.0f, -5.0f};
  for (uint32_t step = 0; step < 5; ++step) {
    EXPECT_EQ(ChooseToken(logits, SamplingParams{}, step, nullptr), 1u);
  }
  std::vector<float> ramp(1000);
  for (size_t i = 0; i < ramp.size(); ++i) ramp[i] = std::sin(static_cast<float>(i) * 0.37f);
  EXPECT_EQ(ChooseToken(ramp, SamplingParams{}, 0, nullptr),
            ops::ArgmaxFirst(ramp.data(), ramp.size()));
}

TEST_F(SamplingTest, TwoEqualLogitsFollowTheUniformByHand) {
  // e = {1, 1}, total 2, target = 2u: token 0 iff 1 > 2u. With seed 0,
  // u = 0.883, 0.432, 0.026 for steps 0, 1, 2.
  const std::vector<float> logits = {0.5f, 0.5f};
  EXPECT_EQ(ChooseToken(logits, Sampled(1, 0), 0, &scratch_), 1u);
  EXPECT_EQ(ChooseToken(logits, Sampled(1, 0), 1, &scratch_), 0u);
  EXPECT_EQ(ChooseToken(logits, Sampled(1, 0), 2, &scratch_), 0u);
}

TEST_F(SamplingTest, TopKOneAndTinyTopPAreGreedy) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, 2.9f};
  for (uint32_t step = 0; step < 200; ++step) {
    EXPECT_EQ(ChooseToken(logits, Sampled(1.5f, 7, 1), step, &scratch_), 1u);
    EXPECT_EQ(ChooseToken(logits, Sampled(0.5f, 9, 0, 0.01f), step, &scratch_), 1u);
  }
}

TEST_F(SamplingTest, TopKKeepsLowestIdsAmongTies) {
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  int seen[4] = {0, 0, 0, 0};
  for (uint32_t step = 0; step < 400; ++step) {
    ++seen[ChooseToken(logits, Sampled(1, 3, 2), step, &scratch_)];
  }
  EXPECT_GT(seen[0], 100);
  EXPECT_GT(seen[1], 100);
  EXPECT_EQ(seen[2] + seen[3], 0);
}

TEST_F(SamplingTest, UniformLogitsGiveRoughlyUniformTokens) {
  const std::vector<float> logits(4, 1.25f);
  int seen[4] = {0, 0, 0, 0};
  for (uint32_t step = 0; step < 4000; ++step) {
    ++seen[ChooseToken(logits, Sampled(0.8f, 12345), step, &scratch_)];
  }
  for (int c : seen) EXPECT_NEAR(c, 1000, 150);
}

TEST_F(SamplingTest, TokensWhoseExpUnderflowsAreNeverChosen) {
  const std::vector<float> logits = {0.0f, -1000.0f, 0.0f};
  for (uint32_t step = 0; step < 300; ++step) {
    EXPECT_NE(ChooseToken(logits, Sampled(1, 5), step, &scratch_), 1u);
  }
}

TEST_F(SamplingTest, SameInputsSameTokenDifferentSeedsDiffer) {
  std::vector<float> logits(500);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::cos(static_cast<float>(i));
  int differ = 0;
  for (uint32_t step = 0; step < 50; ++step) {
    const uint32_t a = ChooseToken(logits, Sampled(1, 1), step, &scratch_);
    SamplingScratch other;
    EXPECT_EQ(a, ChooseToken(logits, Sampled(1, 1), step, &other));
    differ += a != ChooseToken(logits, Sampled(1, 2), step, &scratch_);
  }
  EXPECT_GT(differ, 25);
}

TEST_F(SamplingTest, InvalidParamsNameTheField) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (float t : {-1.0f, 1e-5f, 101.0f, nan}) {
    Status st = ValidateSamplingParams(Sampled(t, 0));
    EXPECT_FALSE(st.ok()) << t;
    EXPECT_NE(st.ToString().find("temperature"), std::string::npos);
  }
  for (float p : {0.0f, -0.5f, 1.5f, nan}) {
    Status st = ValidateSamplingParams(Sampled(1, 0, 0, p));
    EXPECT_FALSE(st.ok()) << p;
    EXPECT_NE(st.ToString().find("top_p"), std::string::npos);
  }
  EXPECT_TRUE(ValidateSamplingParams(Sampled(0, 0)).ok());
  EXPECT_TRUE(ValidateSamplingParams(Sampled(2, 0, 50, 0.95f)).ok());
}

}  // namespace
}  // namespace lockstep
