// Run-time choice of the kernel table by CPUID. Every table gives the same
// bits (kernels.h), so the choice changes speed only.
// Thread-safe; the tables are static and immutable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/ops/kernels.h"

namespace lockstep::ops {

// The fastest table this CPU supports (avx512 > avx2 > scalar on x86-64).
const Kernels& BestKernels();

// "scalar", "avx2", "avx512", "neon" or "auto"; nullptr if the name is
// unknown or this CPU (or build) lacks the ISA.
const Kernels* KernelsByName(std::string_view name);

// The names KernelsByName accepts here, best last (excluding "auto").
std::vector<std::string> AvailableIsas();

}  // namespace lockstep::ops
