// §6.3/§6.7: sin/cos_pinned within 2 ULP of the correctly rounded value
// over every RoPE angle pos * inv_freq[i], pos in [0, 8192), head_dim 64,
// at theta 1e5 and 1e6. The reference is libm's f64 sin/cos rounded to f32.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>

#include "engine/ops/fp_env.h"
#include "engine/ops/pinned_math.h"
#include "engine/ops/rope.h"

namespace lockstep::ops {
namespace {

int64_t UlpDistance(float a, float b) {
  auto line = [](float f) {
    const int32_t i = std::bit_cast<int32_t>(f);
    return i < 0 ? int64_t{INT32_MIN} - i : int64_t{i};
  };
  return std::llabs(line(a) - line(b));
}

void CheckTheta(float theta) {
  ASSERT_TRUE(PinFpEnvironment().ok());
  const auto inv = InvFreq(theta, 64);
  int64_t worst_sin = 0, worst_cos = 0;
  for (int pos = 0; pos < 8192; ++pos) {
    for (float f : inv) {
      const float angle = static_cast<float>(pos) * f;
      float s, c;
      SinCosPinned(angle, &s, &c);
      const double a = static_cast<double>(angle);
      worst_sin = std::max(worst_sin, UlpDistance(s, static_cast<float>(std::sin(a))));
      worst_cos = std::max(worst_cos, UlpDistance(c, static_cast<float>(std::cos(a))));
    }
  }
  EXPECT_LE(worst_sin, 2) << "theta " << theta;
  EXPECT_LE(worst_cos, 2) << "theta " << theta;
  ::testing::Test::RecordProperty("worst_sin_ulp", static_cast<int>(worst_sin));
  ::testing::Test::RecordProperty("worst_cos_ulp", static_cast<int>(worst_cos));
}

TEST(TrigAccuracy, RopeAnglesTheta1e5) { CheckTheta(100000.0f); }
TEST(TrigAccuracy, RopeAnglesTheta1e6) { CheckTheta(1000000.0f); }

TEST(TrigAccuracy, QuadrantIdentities) {
  ASSERT_TRUE(PinFpEnvironment().ok());
  float s, c;
  SinCosPinned(0.0f, &s, &c);
  EXPECT_EQ(std::bit_cast<uint32_t>(s), 0u);
  EXPECT_EQ(std::bit_cast<uint32_t>(c), std::bit_cast<uint32_t>(1.0f));
  SinCosPinned(-2.5f, &s, &c);
  float s2, c2;
  SinCosPinned(2.5f, &s2, &c2);
  EXPECT_EQ(std::bit_cast<uint32_t>(s), std::bit_cast<uint32_t>(-s2));
  EXPECT_EQ(std::bit_cast<uint32_t>(c), std::bit_cast<uint32_t>(c2));
}

}  // namespace
}  // namespace lockstep::ops
