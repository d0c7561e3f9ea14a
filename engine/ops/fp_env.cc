#include "engine/ops/fp_env.h"

#include <bit>
#include <cstdio>

namespace lockstep::ops {
namespace {

// Forces v through memory so the compiler cannot fold arithmetic on it.
template <typename T>
T Opaque(T v) {
  asm volatile("" : "+m"(v));
  return v;
}

#if defined(__x86_64__)
constexpr uint32_t kFtz = 1u << 15;
constexpr uint32_t kDaz = 1u << 6;

uint32_t ReadMxcsr() {
  uint32_t v = 0;
  asm volatile("stmxcsr %0" : "=m"(v));
  return v;
}
void WriteMxcsr(uint32_t v) { asm volatile("ldmxcsr %0" : : "m"(v)); }
#elif defined(__aarch64__)
constexpr uint64_t kFz = 1ull << 24;

uint64_t ReadFpcr() {
  uint64_t v = 0;
  asm volatile("mrs %0, fpcr" : "=r"(v));
  return v;
}
void WriteFpcr(uint64_t v) { asm volatile("msr fpcr, %0" : : "r"(v)); }
#else
#error "CIS-2 §1.3 defines FTZ/DAZ only for x86-64 and aarch64; refusing to build."
#endif

}  // namespace

uint64_t ReadFpControl() {
#if defined(__x86_64__)
  return ReadMxcsr();
#else
  return ReadFpcr();
#endif
}

bool FpEnvironmentPinned() {
#if defined(__x86_64__)
  return (ReadMxcsr() & (kFtz | kDaz)) == (kFtz | kDaz);
#else
  return (ReadFpcr() & kFz) == kFz;
#endif
}

std::string IsaName() {
#if defined(__x86_64__)
  return "x86-64";
#else
  return "aarch64";
#endif
}

Status RunDenormalSelfTest() {
  const float min_normal = Opaque(std::bit_cast<float>(0x00800000u));  // 2^-126
  const float tiny = Opaque(1.0e-10f);
  const float product = Opaque(min_normal * tiny);
  if (std::bit_cast<uint32_t>(product) != 0u) {
    return InternalError("FTZ self-test failed: 2^-126 * 1e-10 gave bits 0x" +
                         std::to_string(std::bit_cast<uint32_t>(product)));
  }
  const float denormal = Opaque(std::bit_cast<float>(0x00000001u));
  const float zero = Opaque(0.0f);
  const float sum = Opaque(denormal + zero);
  if (std::bit_cast<uint32_t>(sum) != 0u) {
    return InternalError("DAZ self-test failed: denormal 0x00000001 + 0.0 gave bits " +
                         std::to_string(std::bit_cast<uint32_t>(sum)));
  }
  return Status::Ok();
}

void UnpinFpEnvironmentForTesting() {
#if defined(__x86_64__)
  WriteMxcsr(ReadMxcsr() & ~(kFtz | kDaz));
#else
  WriteFpcr(ReadFpcr() & ~kFz);
#endif
}

Status PinFpEnvironment() {
#if defined(__x86_64__)
  WriteMxcsr(ReadMxcsr() | kFtz | kDaz);
#else
  WriteFpcr(ReadFpcr() | kFz);
#endif
  if (!FpEnvironmentPinned()) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(ReadFpControl()));
    return InternalError(std::string("FTZ/DAZ pin did not read back; control register = ") + buf);
  }
  return RunDenormalSelfTest();
}

}  // namespace lockstep::ops
