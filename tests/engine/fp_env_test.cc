// §1.3: FTZ/DAZ is pinned per thread, read back, and the self-test holds.
#include <gtest/gtest.h>

#include <thread>

#include "engine/ops/fp_env.h"

namespace lockstep::ops {
namespace {

TEST(FpEnv, PinReadsBackAndSelfTestPasses) {
  ASSERT_TRUE(PinFpEnvironment().ok());
  EXPECT_TRUE(FpEnvironmentPinned());
  EXPECT_TRUE(RunDenormalSelfTest().ok());
}

TEST(FpEnv, SelfTestDetectsAnUnpinnedThread) {
  bool unpinned_detected = false, repinned = false;
  std::thread t([&] {
    UnpinFpEnvironmentForTesting();
    unpinned_detected = !FpEnvironmentPinned() && !RunDenormalSelfTest().ok();
    repinned = PinFpEnvironment().ok() && FpEnvironmentPinned();
  });
  t.join();
  EXPECT_TRUE(unpinned_detected);
  EXPECT_TRUE(repinned);
}

TEST(FpEnv, PinIsPerThread) {
  ASSERT_TRUE(PinFpEnvironment().ok());
  bool other_pinned = true;
  std::thread t([&] {
    UnpinFpEnvironmentForTesting();
    other_pinned = FpEnvironmentPinned();
  });
  t.join();
  EXPECT_FALSE(other_pinned);
  EXPECT_TRUE(FpEnvironmentPinned());  // clearing another thread's bits left ours
}

}  // namespace
}  // namespace lockstep::ops
