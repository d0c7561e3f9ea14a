// The RoPE inv_freq table a model computes with: CIS-2 §7.1 from
// rope_theta and head_dim, then, when config.json asks for it, the Llama-3
// rope_scaling rewrite (extension E1). Its §7.2 digest is the witness's
// inv_freq_table_digest. Pure function; thread-safe.
#pragma once

#include <vector>

#include "engine/io/model_config.h"

namespace lockstep {

// REQUIRES: a parsed config (head_dim even and > 0).
std::vector<float> ModelInvFreq(const ModelConfig& config);

}  // namespace lockstep
