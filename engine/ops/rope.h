// RoPE of CIS-2 §7: the theta-general inv_freq table, its digest, the
// per-position cos/sin table and the rotate-half rotation.
// Pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/sha256.h"

namespace lockstep::ops {

// §7.1: inv_freq[i] = exp_pinned(-((2i/head_dim) * ln_pinned(theta))),
// i in [0, head_dim/2). REQUIRES head_dim even and > 0.
std::vector<float> InvFreq(float rope_theta, int head_dim);

// Extension E1 (Llama-3 rope_scaling, rope_type "llama3"): rewrites each
// inv_freq[i] in binary64 as the extension pins it, then rounds once to
// f32. The four inputs are the config's numbers as binary64.
void ScaleInvFreqLlama3(std::span<float> inv_freq, double factor, double low_freq_factor,
                        double high_freq_factor, double original_max_position_embeddings);

// §7.2: SHA-256 over the LE bytes of inv_freq, in index order.
Digest InvFreqDigest(std::span<const float> inv_freq);

// §7.3: cos_v/sin_v for one position. REQUIRES both spans sized like inv_freq.
void RopeAngles(std::span<const float> inv_freq, int64_t pos,
                std::span<float> cos_v, std::span<float> sin_v);

// §7.4: rotates every head_dim-wide head of `heads` in place (rotate-half).
// heads: [n_heads][head_dim]; cos_v/sin_v: [head_dim/2].
void RotateHalf(std::span<float> heads, int head_dim,
                std::span<const float> cos_v, std::span<const float> sin_v);

// The same rotation from a separate source (used to re-derive K from Kraw):
// out = rotate(in). in/out: [n_heads][head_dim]; may not alias.
void RotateHalfFrom(std::span<const float> in, std::span<float> out, int head_dim,
                    std::span<const float> cos_v, std::span<const float> sin_v);

}  // namespace lockstep::ops
