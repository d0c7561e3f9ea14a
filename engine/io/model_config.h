// ModelConfig: the architecture parameters of a Llama/Qwen2/Mistral/Qwen3
// family checkpoint, read from its Hugging Face config.json (CIS-2 §2.2;
// Qwen3's q/k norm and Qwen3-MoE's experts: EXTENSIONS.md E3, E4).
//
// Parsing is strict about what changes the arithmetic: sizes must be
// positive integers that divide as the architecture needs, floats are cast
// exactly as §2.3 pins (JSON number -> f64 -> one RNE rounding to f32), and
// any feature this runtime does not implement (another activation, RoPE
// scaling other than Llama-3's, interleaved RoPE) is refused as
// Unimplemented rather than ignored. Keys that do not affect the computation are ignored. Every error
// names the file and the field. Plain data; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lockstep {

// Largest value accepted for each size (far above any published model);
// a config over one is Invalid naming the field, before anything sized by
// it is allocated.
struct ConfigLimits {
  int hidden_size = 1 << 16;
  int intermediate_size = 1 << 20;
  int num_layers = 4096;
  int num_heads = 4096;
  int head_dim = 1024;
  int vocab_size = 1 << 24;
  int max_positions = 1 << 24;
  int num_experts = 1024;
  // num_hidden_layers * num_experts: bounds the expert tensors a loader
  // names (three per expert and layer).
  int expert_layers = 1 << 17;
};
inline constexpr ConfigLimits kConfigLimits{};

// `rope_scaling` with rope_type "llama3" (docs/../EXTENSIONS.md E1): the four
// inputs as JSON numbers read as binary64 (§2.3), no rounding to f32.
struct Llama3RopeScaling {
  double factor = 0;
  double low_freq_factor = 0;
  double high_freq_factor = 0;
  double original_max_position_embeddings = 0;
};

// E4: every layer's MLP is a sparse mixture of experts (model_type
// qwen3_moe). num_experts == 0: a dense model.
struct MoeConfig {
  int num_experts = 0;            // "num_experts" E
  int experts_per_tok = 0;        // "num_experts_per_tok" k, 1 <= k <= E
  int intermediate_size = 0;      // "moe_intermediate_size", each expert's
  bool norm_topk_prob = false;    // renormalise the k chosen probabilities
};

struct ModelConfig {
  std::string model_type;          // "llama", "qwen2", "qwen3", ... ("" if absent)
  int hidden_size = 0;
  int intermediate_size = 0;       // dense MLP width; 0 when absent on a MoE model
  int num_layers = 0;              // "num_hidden_layers"
  int num_heads = 0;               // "num_attention_heads"
  int num_kv_heads = 0;            // "num_key_value_heads" (default num_heads)
  int head_dim = 0;                // "head_dim", else hidden_size / num_heads
                                   // (Qwen3: else 128, E3)
  int vocab_size = 0;
  int max_position_embeddings = 0;
  float rms_norm_eps = 0;          // (float)(double)json, §2.3
  float rope_theta = 0;            // (float)(double)json
  bool tie_word_embeddings = false;  // absent -> false (HF Llama/Qwen2 default)
  bool attention_bias = false;     // informative; the loader decides by tensors
  std::vector<int> layer_window;   // [num_layers]; 0 = full causal, else W
  std::optional<Llama3RopeScaling> rope_scaling;  // absent/null -> nullopt
  // A GGUF file's rope_freqs.weight (EXTENSIONS.md E2.2): after §7.1,
  // inv_freq[i] is divided by rope_freqs[i]. [head_dim / 2], or empty.
  std::vector<float> rope_freqs;
  bool qk_norm = false;            // E3: per-head RMSNorm of q and k (qwen3, qwen3_moe)
  MoeConfig moe;                   // E4 (qwen3_moe); num_experts 0 otherwise
  std::vector<uint32_t> eos_token_ids;  // "eos_token_id": an id or a list; absent/null -> none
                                        // (GGUF: tokenizer.ggml.eos_token_id)

  bool is_moe() const { return moe.num_experts > 0; }

  // Query heads per KV head (GQA group size, §9).
  // REQUIRES: a parsed config (num_kv_heads > 0).
  int group() const { return num_heads / num_kv_heads; }
};

// Parses config.json text; `source_name` prefixes every error message.
// Invalid for missing/ill-typed/inconsistent fields, Unimplemented for
// unsupported features (hidden_act other than silu, rope_interleaved true,
// rope_scaling other than rope_type "llama3", unknown layer_types entries,
// decoder_sparse_step other than 1, a non-empty mlp_only_layers).
// model_type qwen3 / qwen3_moe set qk_norm (and the MoE fields, which must
// give 1 <= num_experts_per_tok <= num_experts); an `architectures` entry
// naming Qwen3ForCausalLM / Qwen3MoeForCausalLM must agree with model_type
// (which it gives when absent). llama3 scaling needs factor > 0, 0 < low_freq_factor < high_freq_factor
// and original_max_position_embeddings > 0, all finite (else Invalid).
Result<ModelConfig> ParseModelConfig(std::string_view json_text,
                                     const std::string& source_name);

// Reads and parses the file; NotFound/Io name the path.
Result<ModelConfig> LoadModelConfig(const std::string& path);


}  // namespace lockstep
