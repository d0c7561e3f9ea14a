#include "engine/ops/dispatch.h"

#include "engine/ops/kernels_isa.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace lockstep::ops {
namespace {

#if defined(__x86_64__)
// CPUID leaf 1 ECX: clang 14's __builtin_cpu_supports knows no "f16c".
bool HasF16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & bit_F16C) != 0;
}
bool HasAvx2() {  // with F16C (kF16 weights and quantized scales)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && HasF16c();
}
bool HasAvx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
}
#endif

}  // namespace

const Kernels* KernelsByName(std::string_view name) {
  if (name == "auto") return &BestKernels();
  if (name == "scalar") return &ScalarKernels();
#if defined(__x86_64__)
  if (name == "avx2" && HasAvx2()) return &Avx2Kernels();
  if (name == "avx512" && HasAvx512()) return &Avx512Kernels();
#endif
#if defined(__aarch64__)
  if (name == "neon") return &NeonKernels();
#endif
  return nullptr;
}

std::vector<std::string> AvailableIsas() {
  std::vector<std::string> out;
  for (const char* n : {"scalar", "avx2", "avx512", "neon"}) {
    if (KernelsByName(n) != nullptr) out.push_back(n);
  }
  return out;
}

const Kernels& BestKernels() {
  static const Kernels* best = KernelsByName(AvailableIsas().back());
  return *best;
}

}  // namespace lockstep::ops
