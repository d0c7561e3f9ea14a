// Floating-point environment pin (CIS-2 §1.3).
//
// PinFpEnvironment() sets flush-to-zero and denormals-are-zero on the
// calling thread (x86-64: MXCSR bits 15 and 6; aarch64: FPCR.FZ, bit 24),
// reads the register back, and runs the adversarial denormal self-test
// through an optimisation barrier. It must be called, and must return Ok,
// in every thread that does decode arithmetic, before any of it: threads
// do not inherit MXCSR/FPCR changes made after they start.
// Other ISAs do not compile (§1.3: refuse rather than proceed unpinned).
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"

namespace lockstep::ops {

// Sets the bits, reads them back, runs the self-test. Idempotent.
Status PinFpEnvironment();

// True iff the calling thread's control register has the pin bits set.
bool FpEnvironmentPinned();

// The raw control register of the calling thread (MXCSR or FPCR).
uint64_t ReadFpControl();

// §1.3 self-test on the calling thread: 2^-126 * 1e-10 == +0.0 and
// bits(0x00000001) + 0.0 == +0.0, with operands hidden from the compiler.
Status RunDenormalSelfTest();

// Clears the pin bits on the calling thread. Tests only: proves the
// self-test detects an unpinned thread.
void UnpinFpEnvironmentForTesting();

// "x86-64" or "aarch64".
std::string IsaName();

}  // namespace lockstep::ops
