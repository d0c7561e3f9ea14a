#include "engine/io/synthetic_model.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <vector>

#include "base/read_only_file.h"
#include "engine/io/atomic_file.h"
#include "engine/io/checkpoint.h"
#include "engine/io/safetensors.h"
#include "engine/io/seeded_random.h"

namespace lockstep {
namespace {

void PutBf16(std::vector<uint8_t>& out, size_t i, float v) {
  uint16_t b = Bf16RoundNearestEven(v);
  out[2 * i] = static_cast<uint8_t>(b & 0xFF);
  out[2 * i + 1] = static_cast<uint8_t>(b >> 8);
}

// BF16 bytes of `count` values center + amplitude * u (header comment).
std::vector<uint8_t> Values(const std::string& name, uint64_t seed,
                            size_t count, double center, double amplitude) {
  std::vector<uint8_t> out(2 * count);
  SyntheticValues values(name, seed, center, amplitude);
  for (size_t i = 0; i < count; ++i) PutBf16(out, i, values.Next());
  return out;
}

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // bf16
};

// Collects tensors, seeding each from (seed, name).
struct Builder {
  std::vector<Tensor>& out;
  uint64_t seed;

  void Linear(const std::string& name, int out, int in) {
    Add(name, {out, in}, 0.0, std::sqrt(3.0 / in));
  }
  void Norm(const std::string& name, int n) { Add(name, {n}, 1.0, 0.2); }
  void Bias(const std::string& name, int n) { Add(name, {n}, 0.0, 0.1 * std::sqrt(3.0)); }
  void Add(const std::string& name, std::vector<int64_t> shape, double center,
           double amplitude) {
    size_t count = 1;
    for (int64_t d : shape) count *= static_cast<size_t>(d);
    out.push_back({name, std::move(shape), Values(name, seed, count, center, amplitude)});
  }
};

void AddLayer(Builder& b, const ModelConfig& c, int i, bool with_bias) {
  const std::string p = "model.layers." + std::to_string(i) + ".";
  const int q_dim = c.num_heads * c.head_dim, kv_dim = c.num_kv_heads * c.head_dim;
  b.Norm(p + "input_layernorm.weight", c.hidden_size);
  b.Norm(p + "post_attention_layernorm.weight", c.hidden_size);
  b.Linear(p + "self_attn.q_proj.weight", q_dim, c.hidden_size);
  b.Linear(p + "self_attn.k_proj.weight", kv_dim, c.hidden_size);
  b.Linear(p + "self_attn.v_proj.weight", kv_dim, c.hidden_size);
  b.Linear(p + "self_attn.o_proj.weight", c.hidden_size, q_dim);
  if (c.qk_norm) {
    b.Norm(p + "self_attn.q_norm.weight", c.head_dim);
    b.Norm(p + "self_attn.k_norm.weight", c.head_dim);
  }
  if (c.is_moe()) {
    const int inter = c.moe.intermediate_size;
    b.Linear(p + "mlp.gate.weight", c.moe.num_experts, c.hidden_size);
    for (int e = 0; e < c.moe.num_experts; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      b.Linear(x + "gate_proj.weight", inter, c.hidden_size);
      b.Linear(x + "up_proj.weight", inter, c.hidden_size);
      b.Linear(x + "down_proj.weight", c.hidden_size, inter);
    }
  } else {
    b.Linear(p + "mlp.gate_proj.weight", c.intermediate_size, c.hidden_size);
    b.Linear(p + "mlp.up_proj.weight", c.intermediate_size, c.hidden_size);
    b.Linear(p + "mlp.down_proj.weight", c.hidden_size, c.intermediate_size);
  }
  if (with_bias) {
    b.Bias(p + "self_attn.q_proj.bias", q_dim);
    b.Bias(p + "self_attn.k_proj.bias", kv_dim);
    b.Bias(p + "self_attn.v_proj.bias", kv_dim);
  }
}

}  // namespace

SyntheticShape SmolLM2Shape() {
  SyntheticShape s;
  s.hidden = 576;
  s.layers = 30;
  s.heads = 9;
  s.kv_heads = 3;
  s.inter = 1536;
  s.vocab = 49152;
  s.theta = 1e5;
  return s;
}

SyntheticShape Qwen3_0_6BShape() {
  SyntheticShape s;
  s.hidden = 1024, s.layers = 28, s.heads = 16, s.kv_heads = 8, s.inter = 3072;
  s.vocab = 151936, s.theta = 1e6, s.qwen3 = true, s.head_dim = 128;
  return s;
}

SyntheticShape Qwen3_30B_A3BShape() {
  SyntheticShape s;
  s.hidden = 2048, s.layers = 48, s.heads = 32, s.kv_heads = 4, s.inter = 6144;
  s.vocab = 151936, s.theta = 1e6, s.untied = true, s.qwen3 = true, s.head_dim = 128;
  s.experts = 128, s.top_k = 8, s.moe_inter = 768, s.norm_topk = true;
  return s;
}

uint16_t Bf16RoundNearestEven(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

namespace {

// E3/E4's keys, as Hugging Face's Qwen3 / Qwen3-MoE configs have them.
void AddQwen3Keys(const SyntheticShape& s, nlohmann::json& j) {
  const bool moe = s.experts > 0;
  j["architectures"] = {moe ? "Qwen3MoeForCausalLM" : "Qwen3ForCausalLM"};
  j["model_type"] = moe ? "qwen3_moe" : "qwen3";
  j["head_dim"] = s.head_dim > 0 ? s.head_dim : s.hidden / s.heads;
  j["rms_norm_eps"] = 1e-06;
  if (!moe) return;
  j["num_experts"] = s.experts;
  j["num_experts_per_tok"] = s.top_k;
  j["moe_intermediate_size"] = s.moe_inter;
  j["norm_topk_prob"] = s.norm_topk;
  j["decoder_sparse_step"] = 1;
  j["mlp_only_layers"] = nlohmann::json::array();
}

}  // namespace

std::string SyntheticConfigJson(const SyntheticShape& s) {
  nlohmann::json j = {
      {"architectures", {s.bias ? "Qwen2ForCausalLM" : "LlamaForCausalLM"}},
      {"attention_bias", s.bias},
      {"attention_dropout", 0.0},
      {"bos_token_id", 0},
      {"eos_token_id", 0},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"intermediate_size", s.inter},
      {"max_position_embeddings", 8192},
      {"model_type", s.bias ? "qwen2" : "llama"},
      {"num_attention_heads", s.heads},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", s.kv_heads},
      {"rms_norm_eps", 1e-05},
      {"rope_interleaved", false},
      {"rope_scaling", nullptr},
      {"rope_theta", s.theta},
      {"tie_word_embeddings", !s.untied},
      {"torch_dtype", "bfloat16"},
      {"vocab_size", s.vocab},
  };
  if (s.qwen3 || s.experts > 0) AddQwen3Keys(s, j);
  return j.dump(2) + "\n";
}

namespace {

// A Llama-3 family config.json as Hugging Face publishes them: the fields
// the 3.1 and 3.2 releases share, llama3 rope_scaling, bfloat16.
struct Llama3Shape {
  int hidden, layers, heads, inter;
  double rope_factor;
  bool tied;
};

std::string Llama3ConfigJson(const Llama3Shape& s) {
  nlohmann::json j = {
      {"architectures", {"LlamaForCausalLM"}},
      {"attention_bias", false},
      {"attention_dropout", 0.0},
      {"bos_token_id", 128000},
      {"eos_token_id", {128001, 128008, 128009}},
      {"head_dim", s.hidden / s.heads},
      {"hidden_act", "silu"},
      {"hidden_size", s.hidden},
      {"initializer_range", 0.02},
      {"intermediate_size", s.inter},
      {"max_position_embeddings", 131072},
      {"mlp_bias", false},
      {"model_type", "llama"},
      {"num_attention_heads", s.heads},
      {"num_hidden_layers", s.layers},
      {"num_key_value_heads", 8},
      {"pretraining_tp", 1},
      {"rms_norm_eps", 1e-05},
      {"rope_scaling",
       {{"factor", s.rope_factor},
        {"high_freq_factor", 4.0},
        {"low_freq_factor", 1.0},
        {"original_max_position_embeddings", 8192},
        {"rope_type", "llama3"}}},
      {"rope_theta", 500000.0},
      {"tie_word_embeddings", s.tied},
      {"torch_dtype", "bfloat16"},
      {"use_cache", true},
      {"vocab_size", 128256},
  };
  return j.dump(2) + "\n";
}

}  // namespace

std::string Llama32_1BConfigJson() { return Llama3ConfigJson({2048, 16, 32, 8192, 32.0, true}); }

std::string Llama31_8BConfigJson() { return Llama3ConfigJson({4096, 32, 32, 14336, 8.0, false}); }

namespace {

std::string ShardName(int k, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", k, n);
  return buf;
}

// Tensors in name order, cut into `shards` runs of about equal bytes: file
// k holds the tensors whose first byte falls in [k, k+1) * total / shards.
Status WriteShards(const std::string& dir, std::vector<Tensor> tensors, int shards) {
  std::sort(tensors.begin(), tensors.end(),
            [](const Tensor& a, const Tensor& b) { return a.name < b.name; });
  uint64_t total = 0;
  for (const Tensor& t : tensors) total += t.data.size();
  std::vector<SafetensorsWriter> writers(static_cast<size_t>(shards));
  nlohmann::json map = nlohmann::json::object();
  uint64_t before = 0;
  for (Tensor& t : tensors) {
    const int k = static_cast<int>(
        std::min<uint64_t>(static_cast<uint64_t>(shards) - 1,
                           before * static_cast<uint64_t>(shards) / std::max<uint64_t>(total, 1)));
    before += t.data.size();
    map[t.name] = ShardName(k + 1, shards);
    writers[static_cast<size_t>(k)].Add(t.name, DType::kBF16, std::move(t.shape), std::move(t.data));
  }
  for (int k = 0; k < shards; ++k) {
    LOCKSTEP_RETURN_IF_ERROR(writers[static_cast<size_t>(k)].WriteFile(dir + "/" + ShardName(k + 1, shards)));
  }
  nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", map}};
  return WriteFileAtomically(dir + "/" + kShardIndexFile, index.dump(2) + "\n");
}

}  // namespace

Status WriteSyntheticWeights(const std::string& dir, const ModelConfig& cfg, bool with_bias,
                             uint64_t seed, int shards) {
  if (shards < 1 || shards > 999) {
    return InvalidError("shards must be in [1, 999], got " + std::to_string(shards));
  }
  std::vector<Tensor> tensors;
  Builder b{tensors, seed};
  const double embed_amplitude = std::sqrt(3.0 / cfg.hidden_size);
  b.Add("model.embed_tokens.weight", {cfg.vocab_size, cfg.hidden_size}, 0.0,
        embed_amplitude);
  for (int i = 0; i < cfg.num_layers; ++i) AddLayer(b, cfg, i, with_bias);
  b.Norm("model.norm.weight", cfg.hidden_size);
  if (!cfg.tie_word_embeddings) {
    b.Add("lm_head.weight", {cfg.vocab_size, cfg.hidden_size}, 0.0, embed_amplitude);
  }
  if (shards > 1) return WriteShards(dir, std::move(tensors), shards);
  SafetensorsWriter w;
  for (Tensor& t : tensors) w.Add(t.name, DType::kBF16, std::move(t.shape), std::move(t.data));
  return w.WriteFile(dir + "/" + kSingleWeightsFile);
}

Status WriteSyntheticModel(const std::string& dir, const SyntheticShape& shape,
                           uint64_t seed, const std::string& config_override_path, int shards) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError(dir + ": cannot create directory: " + ec.message());
  std::string text = SyntheticConfigJson(shape);
  std::string source = dir + "/config.json";
  if (!config_override_path.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(text, ReadSmallFile(config_override_path, kMaxConfigJsonBytes, "config.json"));
    source = config_override_path;
  }
  LOCKSTEP_ASSIGN_OR_RETURN(ModelConfig cfg, ParseModelConfig(text, source));
  bool with_bias = config_override_path.empty() ? shape.bias : cfg.attention_bias;
  LOCKSTEP_RETURN_IF_ERROR(WriteFileAtomically(dir + "/config.json", text));
  return WriteSyntheticWeights(dir, cfg, with_bias, seed, shards);
}

}  // namespace lockstep
