// Seeded synthetic GGUF checkpoints (docs/gguf.md): one .gguf file of any
// shape whose matrices are of any E2.3 type — random valid blocks are a
// valid model — for tests and benchmarks (`lockstep make-model --gguf`).
//
// Values (deterministic: same seed -> same bytes on every host), each
// tensor from its own stream (seeded_random.h):
//  - F32/F16/BF16 matrices, the norms (F32) and biases (F32): the values
//    synthetic_model.h describes (a BF16 matrix has the bytes of the same
//    safetensors synthetic model's, rows in GGUF's order);
//  - quantized matrices: blocks of random bytes (every quant, 6-bit scale
//    and min of any value) with f16 block scales d (and dmin) chosen so a
//    weight's standard deviation is about that of the F32 values
//    (1 / sqrt(fan_in)); for real shapes many d are subnormal halves, as in
//    real Q6_K files.
// llama-arch q/k rows are stored permuted as llama.cpp's converter does
// (E2.2). qwen3 layers carry their q/k norms (E3); qwen3_moe layers their
// router (F32, as llama.cpp's quantizer leaves it) and the expert stacks
// ffn_{gate,up,down}_exps [in, out, E], expert e's values those of its
// §2.5 name (E4). Stateless: thread-safe for distinct paths.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/io/dtype.h"
#include "engine/io/gguf.h"
#include "engine/io/model_config.h"

namespace lockstep {

// The type of each tensor of a synthetic (or converted) file.
struct GgufQuantMix {
  std::string name;    // "q4_k_m", "bf16", ...
  DType matrices;      // every linear layer
  DType embedding;     // token_embd (when the head is untied)
  DType output;        // output.weight, or token_embd when tied
  DType more_bits;     // attn_v, ffn_down of llama.cpp's "use more bits" layers
};

// f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k: every matrix of that type;
// q4_k_m: llama.cpp's mix — Q4_K, with Q6_K for the output (the tied
// token_embd) and for attn_v and ffn_down of layers i < n/8, i >= 7n/8 and
// (i - n/8) % 3 == 2. Invalid naming the known ones otherwise.
Result<GgufQuantMix> GgufQuantMixByName(std::string_view name);

// The type `mix` gives a GGUF tensor of a model of `layers` layers whose
// rows have `cols` elements. Rows that are not whole K-quant blocks (256)
// fall back as llama.cpp's quantizer does where E2.3 has its fallback
// (Q6_K -> Q8_0), else to the nearest E2.3 type (Q4_K -> Q4_0 where
// llama.cpp writes Q5_0; Q5_K -> Q8_0 where it writes Q5_1).
DType GgufTypeFor(const GgufQuantMix& mix, std::string_view gguf_name, int layers, bool tied,
                  uint64_t cols);

// Writes `path`: GgufConfigKeys(cfg), `extra` keys (the tokenizer's),
// every tensor of cfg (q/k/v biases when `with_bias`, output.weight when
// untied, q/k norms and experts as cfg says, rope_freqs.weight when
// cfg.rope_freqs is set). Invalid when a
// matrix's rows are not whole blocks of its type, or cfg has rope_scaling
// (GGUF holds it as rope_freqs, rope_table.h).
Status WriteSyntheticGguf(const std::string& path, const ModelConfig& cfg, bool with_bias,
                          const GgufQuantMix& mix, uint64_t seed,
                          const std::vector<std::pair<std::string, GgufValue>>& extra);

// IEEE binary16 bits of f, rounded to nearest, ties to even (subnormal
// halves included; overflow to infinity).
uint16_t F16RoundNearestEven(float f);

}  // namespace lockstep
