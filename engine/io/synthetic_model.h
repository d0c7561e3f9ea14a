// Seeded synthetic checkpoints in the real formats (HF config.json and a BF16
// model.safetensors with every CIS-2 §2.5 tensor), for tests and benchmarks
// that need a model of a given shape without downloading one.
//
// Values (all deterministic, same seed -> identical bytes on every host):
//  - each tensor has its own stream: state = seed ^ FNV-1a-64(tensor name),
//    advanced by splitmix64 (state += 0x9E3779B97F4A7C15, then the
//    splitmix64 finaliser); so layer i's tensors do not depend on the other
//    layers, the shape of other tensors, or their order;
//  - each 64-bit output gives two elements, low 32 bits first; an element
//    takes the top 24 bits r of its half: u = (r + 0.5) / 2^23 - 1, uniform
//    in (-1, 1), then v = center + amplitude * u in f64, rounded to f32,
//    then to bf16 with round-to-nearest-even (Bf16RoundNearestEven);
//  - linear weights [out, in] (a MoE router and experts too): center 0,
//    amplitude sqrt(3 / in), i.e. standard deviation 1/sqrt(fan_in);
//    embed_tokens and lm_head: sqrt(3 / hidden); RMSNorm weights (q/k
//    norms too): 1 + 0.2 u; biases: standard deviation 0.1.
// Stateless functions: thread-safe for distinct output paths.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "engine/io/model_config.h"

namespace lockstep {

struct SyntheticShape {
  int hidden = 64, layers = 2, heads = 4, kv_heads = 2, inter = 128, vocab = 512;
  double theta = 100000;
  bool bias = false;    // q/k/v_proj.bias, config model_type "qwen2"
  bool untied = false;  // tie_word_embeddings false, separate lm_head.weight
  // Qwen3 (EXTENSIONS.md E3): model_type "qwen3", q_norm/k_norm per layer,
  // an explicit head_dim (0: hidden / heads), rms_norm_eps 1e-6.
  bool qwen3 = false;
  int head_dim = 0;
  // Qwen3-MoE (E4) when experts > 0 (implies qwen3): model_type
  // "qwen3_moe", a router and `experts` experts of width moe_inter per
  // layer, top_k of them per token.
  int experts = 0, top_k = 0, moe_inter = 0;
  bool norm_topk = false;  // norm_topk_prob
};

// SmolLM2-135M's shape: 576 hidden, 30 layers, 9/3 heads, 1536, 49152,
// theta 1e5, tied, no bias.
SyntheticShape SmolLM2Shape();

// Qwen3-0.6B's shape: hidden 1024, 28 layers, 16/8 heads, head_dim 128,
// intermediate 3072, vocab 151936, tied, theta 1e6.
SyntheticShape Qwen3_0_6BShape();
// Qwen3-30B-A3B's shape: hidden 2048, 48 layers, 32/4 heads, head_dim 128,
// 128 experts, top 8, moe_intermediate 768 (intermediate 6144, unused),
// vocab 151936, untied, norm_topk_prob, theta 1e6.
SyntheticShape Qwen3_30B_A3BShape();

// Llama-3.2-1B's config.json as Hugging Face publishes it: hidden 2048,
// 16 layers, 32/8 heads, head_dim 64, intermediate 8192, vocab 128256,
// tied, rope_theta 500000 with llama3 rope_scaling (factor 32, low 1,
// high 4, original 8192), max_position_embeddings 131072, rms_norm_eps
// 1e-5, bos 128000, eos [128001, 128008, 128009], bfloat16.
std::string Llama32_1BConfigJson();

// Llama-3.1-8B's config.json as Hugging Face publishes it: hidden 4096,
// 32 layers, 32/8 heads, head_dim 128, intermediate 14336, vocab 128256,
// untied, rope_theta 500000 with llama3 rope_scaling (factor 8, low 1,
// high 4, original 8192), max_position_embeddings 131072, rms_norm_eps
// 1e-5, bos 128000, eos [128001, 128008, 128009], bfloat16.
std::string Llama31_8BConfigJson();

// An HF-style config.json (2-space indent, sorted keys, final newline).
// REQUIRES: heads divides hidden, unless a Qwen3 shape gives head_dim.
std::string SyntheticConfigJson(const SyntheticShape& shape);

// f32 -> bf16 bits, round to nearest, ties to even; NaN stays NaN (quiet).
uint16_t Bf16RoundNearestEven(float f);

// Writes every §2.5 tensor for `cfg` (plus self_attn.{q,k,v}_proj.bias when
// `with_bias`, plus lm_head.weight when !cfg.tie_word_embeddings, plus
// E3's q/k norms and E4's router and experts where cfg has them) as BF16
// into `dir`: model.safetensors when shards == 1; else a sharded checkpoint
// (engine/io/checkpoint.h): model-0000K-of-0000N.safetensors, K = 1..N, the
// tensors in name order cut into N runs of about equal bytes (so a layer's
// tensors may span two files), and model.safetensors.index.json
// {"metadata": {"total_size": bytes}, "weight_map": {...}}. The tensors'
// bytes are the same either way. Invalid unless 1 <= shards <= 999.
Status WriteSyntheticWeights(const std::string& dir, const ModelConfig& cfg, bool with_bias,
                             uint64_t seed, int shards = 1);

// Creates `dir` and writes config.json and the weights there (shards as
// for WriteSyntheticWeights).
// config.json is SyntheticConfigJson(shape), or, when config_override_path
// is not empty, a byte-exact copy of that file — then the shape and the
// bias choice come from that config (its attention_bias). tokenizer.json
// is not written.
Status WriteSyntheticModel(const std::string& dir, const SyntheticShape& shape,
                           uint64_t seed, const std::string& config_override_path,
                           int shards = 1);

}  // namespace lockstep
