// The RoPE inv_freq table a model computes with: CIS-2 §7.1 from
// rope_theta and head_dim, then, when config.json asks for it, the Llama-3
// rope_scaling rewrite (extension E1), or a GGUF file's division by
// rope_freqs.weight (E2.2). Its §7.2 digest is the witness's
// inv_freq_table_digest. Pure function; thread-safe.
#pragma once

#include <vector>

#include "engine/io/model_config.h"

namespace lockstep {

// REQUIRES: a parsed config (head_dim even and > 0).
std::vector<float> ModelInvFreq(const ModelConfig& config);

// llama.cpp's form of Llama-3 rope scaling for a GGUF file's
// rope_freqs.weight (convert_hf_to_gguf.py): for each f = the §7.1 inv_freq
// (widened to binary64), wavelength 2π / f: 1 below old /
// high_freq_factor, factor above old / low_freq_factor, else 1 / ((1 -
// smooth) / factor + smooth) with smooth as E1 computes it; each evaluated
// in binary64 and rounded once to f32. A file carrying them computes with
// E2.2's division, not E1, so its inv_freq table may differ from the
// config.json's in the last bit. REQUIRES config.rope_scaling.
std::vector<float> Llama3RopeFreqs(const ModelConfig& config);

}  // namespace lockstep
