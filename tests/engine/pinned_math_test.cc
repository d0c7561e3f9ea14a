// Pinned math (CIS-2 §5-§7) against the spec's pinned values and against
// correctly-rounded references computed independently with libm in f64.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>

#include "base/sha256.h"
#include "engine/ops/fp_env.h"
#include "engine/ops/kernels.h"
#include "engine/ops/pinned_math.h"
#include "engine/ops/rope.h"

namespace lockstep::ops {
namespace {

class PinnedMath : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(PinFpEnvironment().ok()); }
};

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }

// Distance in representable floats between a and b (same sign assumed
// away by mapping to a monotonic integer line).
int64_t UlpDistance(float a, float b) {
  auto line = [](float f) {
    const int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};
  };
  return std::llabs(line(a) - line(b));
}

TEST_F(PinnedMath, TableDigestMatchesSpec66) {
  EXPECT_EQ(ToHex(TableDigest()),
            "23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d");
}

TEST_F(PinnedMath, InvFreqDigestMatchesSpec72) {
  const auto inv = InvFreq(100000.0f, 64);
  ASSERT_EQ(inv.size(), 32u);
  EXPECT_EQ(Bits(inv[0]), Bits(1.0f));
  EXPECT_EQ(ToHex(InvFreqDigest(inv)),
            "da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12");
}

TEST_F(PinnedMath, DotSeqRegressionSpec51) {
  const float a[3] = {1e8f, 1.0f, -1e8f}, b[3] = {1.0f, 1.0f, 1.0f};
  EXPECT_EQ(Bits(DotSeq(a, b, 3)), 0u);
  const float c[3] = {1.0f, 1e8f, -1e8f};  // another order: the 1 survives
  EXPECT_EQ(Bits(DotSeq(c, b, 3)), Bits(0.0f));
  const float d[3] = {1e8f, -1e8f, 1.0f};
  EXPECT_EQ(Bits(DotSeq(d, b, 3)), Bits(1.0f));
}

TEST_F(PinnedMath, RsqrtOf64IsExact) { EXPECT_EQ(Bits(Rsqrt(64.0f)), 0x3E000000u); }

TEST_F(PinnedMath, LnThetaAgreesWithV01Literal) {
  const float ln = LnPinned(100000.0f);
  const float literal = std::bit_cast<float>(0x413834F1u);
  EXPECT_LE(std::fabs(ln - literal) / literal, 2e-6f);
  EXPECT_TRUE(std::isnan(LnPinned(-1.0f)));
  EXPECT_EQ(LnPinned(0.0f), -std::numeric_limits<float>::infinity());
  for (float x : {0.001f, 0.1f, 0.5f, 0.999f, 1.0f, 1.5f, 2.0f, 10.0f, 100.0f, 1e5f, 1e6f}) {
    const double ref = std::log(static_cast<double>(x));
    EXPECT_LE(std::fabs(LnPinned(x) - ref), 2e-6 * std::fabs(ref) + 1e-12) << x;
  }
}

TEST_F(PinnedMath, ExpDomainClampsAndNaN) {
  EXPECT_TRUE(std::isinf(ExpPinned(88.5f)));
  EXPECT_EQ(Bits(ExpPinned(-88.5f)), 0u);
  EXPECT_TRUE(std::isnan(ExpPinned(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(Bits(ExpPinned(0.0f)), Bits(1.0f));
}

// §6.7: exp_pinned is within 1 ULP of the correctly rounded value on [-40, 40].
TEST_F(PinnedMath, ExpWithinOneUlpOnMinus40To40) {
  int64_t worst = 0;
  for (int i = -400000; i <= 400000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;
    const float ref = static_cast<float>(std::exp(static_cast<double>(x)));
    worst = std::max(worst, UlpDistance(ExpPinned(x), ref));
  }
  EXPECT_LE(worst, 1);
}

TEST_F(PinnedMath, LdexpAndFrexpAreExactBitOps) {
  EXPECT_EQ(Bits(LdexpExact(1.5f, 3)), Bits(12.0f));
  EXPECT_EQ(Bits(LdexpExact(-1.5f, -1)), Bits(-0.75f));
  EXPECT_EQ(Bits(LdexpExact(1.0f, -200)), 0u);
  EXPECT_EQ(LdexpExact(-1.0f, 300), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(Bits(LdexpExact(-0.0f, 5)), Bits(-0.0f));
  float m;
  int32_t e;
  FrexpExact(12.0f, &m, &e);
  EXPECT_EQ(Bits(m), Bits(0.75f));
  EXPECT_EQ(e, 4);
}

TEST_F(PinnedMath, SiluMatchesDefinition) {
  for (float x : {-100.0f, -3.5f, -0.0f, 0.0f, 0.25f, 7.0f, 100.0f}) {
    const float e = ExpPinned(-x);
    const float denom = 1.0f + e;
    EXPECT_EQ(Bits(Silu(x)), Bits(x / denom)) << x;
  }
}

TEST_F(PinnedMath, SoftmaxFirstMaxAndDivision) {
  float v[4] = {1.0f, 3.0f, 3.0f, -2.0f};
  SoftmaxSeq(v, 4);
  EXPECT_EQ(Bits(v[1]), Bits(v[2]));
  float sum = 0.0f;
  for (float x : v) sum += x;
  EXPECT_NEAR(sum, 1.0f, 1e-6f);
  const float w[5] = {0.5f, 2.0f, 2.0f, 1.0f, 2.0f};
  EXPECT_EQ(ArgmaxFirst(w, 5), 1u);
}

}  // namespace
}  // namespace lockstep::ops
