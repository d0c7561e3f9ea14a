// ops_tests main: pins FTZ/DAZ (§1.3) on the main thread before any test
// computes, as the lockstep binary does.
#include <gtest/gtest.h>

#include <cstdio>

#include "engine/ops/fp_env.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const lockstep::Status pin = lockstep::ops::PinFpEnvironment();
  if (!pin.ok()) {
    std::fprintf(stderr, "cannot pin the FP environment: %s\n", pin.ToString().c_str());
    return 1;
  }
  return RUN_ALL_TESTS();
}
