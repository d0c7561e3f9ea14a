// Pinned transcendental functions of CIS-2 §6, bit for bit.
//
// Every function is a pure function of its input bits, given the FTZ/DAZ
// pin of fp_env.h. Multiplies and adds are separate, RNE-rounded
// operations (the build uses -ffp-contract=off); no libm call is made.
// Thread-safe (no state).
#pragma once

#include <cstdint>

#include "base/sha256.h"

namespace lockstep::ops {

// §6.2 coefficients (f32 bit patterns).
inline constexpr uint32_t kExpLog2e = 0x3FB8AA3B;
inline constexpr uint32_t kExpC1 = 0x3F318000;
inline constexpr uint32_t kExpC2 = 0xB95E8083;
inline constexpr uint32_t kExpP[6] = {0x39506967, 0x3AB743CE, 0x3C088908,
                                      0x3D2AA9C1, 0x3E2AAAAA, 0x3F000000};
// §6.3 (v0.3b) octant reduction constant (f64 bits) and minimax coefficients.
inline constexpr uint64_t kPi2F64 = 0x3FF921FB54442D18ull;
inline constexpr uint32_t kSinC[3] = {0xBE2AAAA3, 0x3C08839E, 0xB94CA1F9};
inline constexpr uint32_t kCosC[3] = {0x3D2AAAA5, 0xBAB6061A, 0x37CCF5CE};
// §6.5 ln coefficients.
inline constexpr uint32_t kLogSqrtHf = 0x3F3504F3;
inline constexpr uint32_t kLogQ1 = 0xB95E8083;
inline constexpr uint32_t kLogQ2 = 0x3F318000;
inline constexpr uint32_t kLogP[9] = {0x3D9021BB, 0xBDEBD1B8, 0x3DEF251B,
                                      0xBDFE5D4F, 0x3E11E9BF, 0xBE2AAE50,
                                      0x3E4CCEAD, 0xBE7FFFFC, 0x3EAAAAAA};

// §6.2.1: replaces the exponent field; 0 on underflow, ±inf on overflow.
float LdexpExact(float x, int32_t k);
// §6.5.1: x = mantissa * 2^exponent, mantissa in [0.5, 1). REQUIRES x > 0, finite.
void FrexpExact(float x, float* mantissa, int32_t* exponent);

float ExpPinned(float x);   // §6.2
float LnPinned(float x);    // §6.5
// §6.3 (v0.3b): both values from one reduction.
void SinCosPinned(float x, float* sin_out, float* cos_out);
float SinPinned(float x);
float CosPinned(float x);
float Rsqrt(float x);       // §6.1: 1 / sqrt(x), both correctly rounded
float Silu(float x);        // §6.4: x / (1 + exp_pinned(-x))

// §6.6: SHA-256 over the LE bytes of every pinned coefficient, in order.
Digest TableDigest();

}  // namespace lockstep::ops
