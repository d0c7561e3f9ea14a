// ModelConfig from a GGUF file's metadata (EXTENSIONS.md E2.2): the
// `{arch}.` keys mapped onto the §2.2 fields, vocab from token_embd.weight,
// the head tied when output.weight is absent, and llama.cpp's Llama-3 rope
// scaling (rope_freqs.weight) read into ModelConfig::rope_freqs, the
// end-of-sequence ids from tokenizer.ggml.eos_token_id (and eot, eom).
//
// As strict as ParseModelConfig: every size a positive integer (any integer
// vtype; an array — a per-layer value — is refused) within kConfigLimits,
// heads that divide as the architecture needs, eps and rope theta an f32
// used as is or an f64 rounded once to f32, positive and finite. Invalid
// names the file and the key (or tensor); Unimplemented an architecture or
// rope scaling type this runtime does not compute. Stateless: thread-safe.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/io/gguf.h"
#include "engine/io/model_config.h"

namespace lockstep {

// Reads rope_freqs.weight's bytes when the file has it (Corrupt if the
// file was truncated since it was opened).
Result<ModelConfig> ModelConfigFromGguf(const GgufFile& file);

// The metadata a writer gives `config` (model_type llama or qwen2; no
// rope_scaling, which GGUF holds as rope_freqs.weight) so that
// ModelConfigFromGguf reads it back: general.architecture and the
// `{arch}.` keys of E2.2 (u32 sizes, f32 eps and theta). The tensors
// carry the rest (vocab, tied head, rope_freqs).
std::vector<std::pair<std::string, GgufValue>> GgufConfigKeys(const ModelConfig& config);

}  // namespace lockstep
