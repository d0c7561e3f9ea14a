// The per-ISA kernel tables, each defined in its own translation unit
// compiled with that ISA's flags. Only dispatch.cc and tests call these,
// and only after checking the CPU supports the ISA (dispatch.h).
#pragma once

#include "engine/ops/kernels.h"

namespace lockstep::ops {

#if defined(__x86_64__)
const Kernels& Avx2Kernels();    // REQUIRES: CPU has AVX2 and F16C
const Kernels& Avx512Kernels();  // REQUIRES: CPU has AVX-512 F and BW
#endif
#if defined(__aarch64__)
const Kernels& NeonKernels();
#endif

}  // namespace lockstep::ops
