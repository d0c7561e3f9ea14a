#include "engine/ops/rope.h"

#include <cassert>
#include <cstring>

#include "engine/ops/pinned_math.h"

namespace lockstep::ops {

std::vector<float> InvFreq(float rope_theta, int head_dim) {
  assert(head_dim > 0 && head_dim % 2 == 0);
  const float ln_theta = LnPinned(rope_theta);
  const int half = head_dim / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  for (int i = 0; i < half; ++i) {
    const float frac = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float prod = frac * ln_theta;
    const float neg_arg = -prod;
    inv[static_cast<size_t>(i)] = ExpPinned(neg_arg);
  }
  return inv;
}

void ScaleInvFreqLlama3(std::span<float> inv_freq, double factor, double low_freq_factor,
                        double high_freq_factor, double old) {
  const double kTwoPi = 6.283185307179586;  // binary64 nearest 2*pi
  // Each line one binary64 operation, rounded to nearest (no contraction:
  // the build uses -ffp-contract=off).
  const double lo_wl = old / low_freq_factor;
  const double hi_wl = old / high_freq_factor;
  for (float& v : inv_freq) {
    const double f = static_cast<double>(v);
    const double wl = kTwoPi / f;
    const double out = (wl > lo_wl) ? f / factor : f;
    const double smooth = (old / wl - low_freq_factor) / (high_freq_factor - low_freq_factor);
    const double one_minus = 1.0 - smooth;
    const double a = one_minus * out;
    const double b = a / factor;
    const double c = smooth * out;
    const double smoothed = b + c;
    const bool medium = !(wl < hi_wl) && !(wl > lo_wl);
    v = static_cast<float>(medium ? smoothed : out);
  }
}

Digest InvFreqDigest(std::span<const float> inv_freq) {
  Sha256Stream h;
  for (float v : inv_freq) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    h.UpdateU32Le(bits);
  }
  return h.Finalize();
}

void RopeAngles(std::span<const float> inv_freq, int64_t pos,
                std::span<float> cos_v, std::span<float> sin_v) {
  assert(cos_v.size() == inv_freq.size() && sin_v.size() == inv_freq.size());
  const float p = static_cast<float>(pos);
  for (size_t i = 0; i < inv_freq.size(); ++i) {
    const float angle = p * inv_freq[i];
    SinCosPinned(angle, &sin_v[i], &cos_v[i]);
  }
}

namespace {

// One head: out[i] = x1*c + (-x2)*s; out[i+half] = x2*c + x1*s.
void RotateOne(const float* in, float* out, size_t half, const float* c, const float* s) {
  for (size_t i = 0; i < half; ++i) {
    const float x1 = in[i];
    const float x2 = in[i + half];
    const float t1 = x1 * c[i];
    const float t2 = (-x2) * s[i];
    const float t3 = x2 * c[i];
    const float t4 = x1 * s[i];
    out[i] = t1 + t2;
    out[i + half] = t3 + t4;
  }
}

}  // namespace

void RotateHalfFrom(std::span<const float> in, std::span<float> out, int head_dim,
                    std::span<const float> cos_v, std::span<const float> sin_v) {
  assert(in.size() == out.size() && in.size() % static_cast<size_t>(head_dim) == 0);
  const size_t hd = static_cast<size_t>(head_dim);
  for (size_t h = 0; h < in.size() / hd; ++h) {
    RotateOne(in.data() + h * hd, out.data() + h * hd, hd / 2, cos_v.data(), sin_v.data());
  }
}

void RotateHalf(std::span<float> heads, int head_dim,
                std::span<const float> cos_v, std::span<const float> sin_v) {
  const size_t hd = static_cast<size_t>(head_dim);
  float tmp[1024];
  assert(hd <= 1024);
  for (size_t h = 0; h < heads.size() / hd; ++h) {
    float* head = heads.data() + h * hd;
    RotateOne(head, tmp, hd / 2, cos_v.data(), sin_v.data());
    std::memcpy(head, tmp, hd * sizeof(float));
  }
}

}  // namespace lockstep::ops
