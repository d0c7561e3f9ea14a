#include "engine/ops/pinned_math.h"

#include <bit>
#include <cmath>
#include <limits>

namespace lockstep::ops {
namespace {

constexpr float F(uint32_t bits) { return std::bit_cast<float>(bits); }

// floor() for |z| < 2^23, without libm. Exact.
float FloorSmall(float z) {
  float t = static_cast<float>(static_cast<int32_t>(z));
  if (t > z) t = t - 1.0f;
  return t;
}

// Rust f64::round: nearest integer, ties away from zero. Exact.
double RoundHalfAway(double v) {
  if (!(std::fabs(v) < 4503599627370496.0)) return v;  // already integral, inf or NaN
  double t = static_cast<double>(static_cast<int64_t>(v));
  const double frac = v - t;  // exact
  if (frac >= 0.5) t = t + 1.0;
  if (frac <= -0.5) t = t - 1.0;
  return t;
}

// Rust `k as i64`: saturating, NaN -> 0.
int64_t SaturatingToI64(double k) {
  if (std::isnan(k)) return 0;
  if (k >= 9223372036854775808.0) return std::numeric_limits<int64_t>::max();
  if (k < -9223372036854775808.0) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(k);
}

}  // namespace

float LdexpExact(float x, int32_t k) {
  if (x == 0.0f) return x;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const int32_t exp_bits = static_cast<int32_t>((bits >> 23) & 0xFF);
  const int64_t new_exp = static_cast<int64_t>(exp_bits) + k;
  if (new_exp <= 0) return 0.0f;
  if (new_exp >= 0xFF) {
    return std::signbit(x) ? -std::numeric_limits<float>::infinity()
                           : std::numeric_limits<float>::infinity();
  }
  const uint32_t new_bits = (bits & ~(0xFFu << 23)) | (static_cast<uint32_t>(new_exp) << 23);
  return std::bit_cast<float>(new_bits);
}

void FrexpExact(float x, float* mantissa, int32_t* exponent) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const int32_t exp_bits = static_cast<int32_t>((bits >> 23) & 0xFF);
  *mantissa = std::bit_cast<float>((bits & 0x807FFFFFu) | (126u << 23));
  *exponent = exp_bits - 126;
}

float ExpPinned(float x) {
  if (std::isnan(x)) return x;
  if (x > 88.0f) return std::numeric_limits<float>::infinity();
  if (x < -88.0f) return 0.0f;
  const float t = x * F(kExpLog2e);
  const float z0 = t + 0.5f;
  const float k = FloorSmall(z0);
  const float kc1 = k * F(kExpC1);
  const float r0 = x - kc1;
  const float kc2 = k * F(kExpC2);
  const float r = r0 - kc2;
  const float r2 = r * r;
  float poly = F(kExpP[0]);
  for (int i = 1; i <= 5; ++i) {
    const float pr = poly * r;
    poly = pr + F(kExpP[i]);
  }
  const float m1 = poly * r2;
  const float poly2 = m1 + r;
  const float result = poly2 + 1.0f;
  return LdexpExact(result, static_cast<int32_t>(k));
}

float LnPinned(float x) {
  if (std::isnan(x) || x < 0.0f) return std::numeric_limits<float>::quiet_NaN();
  if (x == 0.0f) return -std::numeric_limits<float>::infinity();
  if (std::isinf(x)) return x;
  float m;
  int32_t e;
  FrexpExact(x, &m, &e);
  if (m < F(kLogSqrtHf)) {
    e = e - 1;
    const float twice = m + m;
    m = twice - 1.0f;
  } else {
    m = m - 1.0f;
  }
  const float z = m * m;
  float poly = F(kLogP[0]);
  for (int i = 1; i <= 8; ++i) {
    const float pm = poly * m;
    poly = pm + F(kLogP[i]);
  }
  float y = poly * m;
  y = y * z;
  const float fe = static_cast<float>(e);
  const float t1 = fe * F(kLogQ1);
  y = y + t1;
  const float half_z = 0.5f * z;
  y = y - half_z;
  float result = m + y;
  const float t2 = fe * F(kLogQ2);
  result = result + t2;
  return result;
}

void SinCosPinned(float x, float* sin_out, float* cos_out) {
  const double pi_2 = std::bit_cast<double>(kPi2F64);
  const double xd = static_cast<double>(x);
  const double q = xd / pi_2;
  const double k = RoundHalfAway(q);
  const double khi = k * pi_2;
  const double r64 = xd - khi;
  const float r = static_cast<float>(r64);
  const int64_t quadrant = ((SaturatingToI64(k) % 4) + 4) % 4;

  const float r2 = r * r;
  float s_inner = F(kSinC[2]);
  s_inner = s_inner * r2;
  s_inner = s_inner + F(kSinC[1]);
  s_inner = s_inner * r2;
  s_inner = s_inner + F(kSinC[0]);
  const float r3 = r2 * r;
  const float s_term = s_inner * r3;
  const float sin_r = r + s_term;

  float c_inner = F(kCosC[2]);
  c_inner = c_inner * r2;
  c_inner = c_inner + F(kCosC[1]);
  c_inner = c_inner * r2;
  c_inner = c_inner + F(kCosC[0]);
  const float r4 = r2 * r2;
  const float c_term = c_inner * r4;
  const float half_r2 = 0.5f * r2;
  const float step1 = 1.0f - half_r2;
  const float cos_r = step1 + c_term;

  switch (quadrant) {
    case 0: *sin_out = sin_r; *cos_out = cos_r; break;
    case 1: *sin_out = cos_r; *cos_out = -sin_r; break;
    case 2: *sin_out = -sin_r; *cos_out = -cos_r; break;
    default: *sin_out = -cos_r; *cos_out = sin_r; break;
  }
}

float SinPinned(float x) {
  float s, c;
  SinCosPinned(x, &s, &c);
  return s;
}

float CosPinned(float x) {
  float s, c;
  SinCosPinned(x, &s, &c);
  return c;
}

float Rsqrt(float x) {
  const float root = __builtin_sqrtf(x);
  return 1.0f / root;
}

float Silu(float x) {
  const float neg = -x;
  const float e = ExpPinned(neg);
  const float denom = 1.0f + e;
  return x / denom;
}

Digest TableDigest() {
  Sha256Stream h;
  auto f32 = [&h](uint32_t bits) { h.UpdateU32Le(bits); };
  f32(kExpLog2e);
  f32(kExpC1);
  f32(kExpC2);
  for (uint32_t c : kExpP) f32(c);
  h.UpdateU32Le(static_cast<uint32_t>(kPi2F64));
  h.UpdateU32Le(static_cast<uint32_t>(kPi2F64 >> 32));
  for (uint32_t c : kSinC) f32(c);
  for (uint32_t c : kCosC) f32(c);
  f32(kLogSqrtHf);
  f32(kLogQ1);
  f32(kLogQ2);
  for (uint32_t c : kLogP) f32(c);
  return h.Finalize();
}

}  // namespace lockstep::ops
