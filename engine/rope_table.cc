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
  return inv;
}

}  // namespace lockstep
