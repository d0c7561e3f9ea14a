#include "engine/rope_table.h"

#include "engine/ops/rope.h"

namespace lockstep {

std::vector<float> ModelInvFreq(const ModelConfig& c) {
  std::vector<float> inv = ops::InvFreq(c.rope_theta, c.head_dim);
  if (c.rope_scaling) {
    const Llama3RopeScaling& s = *c.rope_scaling;
    ops::ScaleInvFreqLlama3(inv, s.factor, s.low_freq_factor, s.high_freq_factor,
                            s.original_max_position_embeddings);
  }
  for (size_t i = 0; i < c.rope_freqs.size() && i < inv.size(); ++i) {
    inv[i] = inv[i] / c.rope_freqs[i];  // E2.2: one f32 division
  }
  return inv;
}

std::vector<float> Llama3RopeFreqs(const ModelConfig& c) {
  const Llama3RopeScaling& s = *c.rope_scaling;
  const double two_pi = 6.283185307179586;
  const double lo_wl = s.original_max_position_embeddings / s.low_freq_factor;
  const double hi_wl = s.original_max_position_embeddings / s.high_freq_factor;
  std::vector<float> out;
  for (float inv : ops::InvFreq(c.rope_theta, c.head_dim)) {
    const double wl = two_pi / static_cast<double>(inv);
    double factor = 1.0;
    if (wl > lo_wl) {
      factor = s.factor;
    } else if (!(wl < hi_wl)) {
      const double smooth = (s.original_max_position_embeddings / wl - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      factor = 1.0 / ((1.0 - smooth) / s.factor + smooth);
    }
    out.push_back(static_cast<float>(factor));
  }
  return out;
}

}  // namespace lockstep
