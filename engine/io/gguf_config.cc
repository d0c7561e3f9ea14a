#include "engine/io/gguf_config.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>

#include "engine/io/gguf_names.h"
#include "engine/io/gguf_writer.h"

namespace lockstep {
namespace {

// Typed access to the `{arch}.` keys of one file.
class Keys {
 public:
  Keys(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  const GgufValue* Find(const std::string& key) const { return f_.Find(arch_ + "." + key); }
  Status Error(const std::string& key, const std::string& what) const {
    return InvalidError(f_.path() + ": key \"" + arch_ + "." + key + "\": " + what);
  }

  // An integer in [1, max]; `if_absent` when absent and given, else Invalid.
  Result<int> Size(const std::string& key, int max, std::optional<int> if_absent = {}) const {
    const GgufValue* v = Find(key);
    if (v == nullptr) {
      if (if_absent) return *if_absent;
      return Error(key, "missing");
    }
    if (v->type == GgufType::kArray) return Error(key, "is an array (per-layer values are refused)");
    const std::optional<int64_t> n = v->Int();
    if (!IsGgufInteger(v->type) || !n) {
      return Error(key, "is a " + std::string(GgufTypeName(v->type)) + ", not an integer");
    }
    if (*n < 1 || *n > max) {
      return Error(key, "must be in [1, " + std::to_string(max) + "], got " + std::to_string(*n));
    }
    return static_cast<int>(*n);
  }

  // An f32 used as is, or an f64 rounded once to f32 (E2.2); positive and
  // finite.
  Result<float> PositiveFloat(const std::string& key, std::optional<float> if_absent = {}) const {
    const GgufValue* v = Find(key);
    if (v == nullptr) {
      if (if_absent) return *if_absent;
      return Error(key, "missing");
    }
    float f;
    if (v->type == GgufType::kF32) {
      f = std::bit_cast<float>(static_cast<uint32_t>(v->bits));
    } else if (v->type == GgufType::kF64) {
      f = static_cast<float>(std::bit_cast<double>(v->bits));
    } else {
      return Error(key, "is a " + std::string(GgufTypeName(v->type)) + ", not an f32 or f64");
    }
    if (!(f > 0.0f) || !std::isfinite(f)) return Error(key, "must be positive and finite as f32");
    return f;
  }

  // When present, must equal `want`.
  Status SameIfPresent(const std::string& key, int want) const {
    if (Find(key) == nullptr) return Status::Ok();
    LOCKSTEP_ASSIGN_OR_RETURN(int got, Size(key, kConfigLimits.head_dim));
    if (got != want) {
      return Error(key, std::to_string(got) + " differs from head_dim " + std::to_string(want));
    }
    return Status::Ok();
  }

 private:
  const GgufFile& f_;
  const std::string arch_;
};

// general.architecture and the model_type it stands for (E2.2, E3).
struct Arch {
  const char* gguf;
  const char* model_type;
};
constexpr Arch kArchs[] = {
    {"llama", "llama"}, {"qwen2", "qwen2"}, {"qwen3", "qwen3"}, {"qwen3moe", "qwen3_moe"}};

Result<Arch> Architecture(const GgufFile& f) {
  const GgufValue* a = f.Find("general.architecture");
  const std::string where = f.path() + ": key \"general.architecture\"";
  if (a == nullptr) return InvalidError(where + ": missing");
  if (a->type != GgufType::kString) return InvalidError(where + ": is not a string");
  for (const Arch& arch : kArchs) {
    if (a->string == arch.gguf) return arch;
  }
  return UnimplementedError(where + ": \"" + a->string +
                            "\" is not one of llama, qwen2, qwen3, qwen3moe");
}

Status ParseSizes(const Keys& k, ModelConfig& c) {
  const ConfigLimits& l = kConfigLimits;
  LOCKSTEP_ASSIGN_OR_RETURN(c.num_layers, k.Size("block_count", l.num_layers));
  LOCKSTEP_ASSIGN_OR_RETURN(c.hidden_size, k.Size("embedding_length", l.hidden_size));
  // A MoE model's dense width is unused (E4), absent or not.
  LOCKSTEP_ASSIGN_OR_RETURN(c.intermediate_size,
                            k.Size("feed_forward_length", l.intermediate_size,
                                   c.model_type == "qwen3_moe" ? std::optional<int>(0) : std::nullopt));
  LOCKSTEP_ASSIGN_OR_RETURN(c.num_heads, k.Size("attention.head_count", l.num_heads));
  LOCKSTEP_ASSIGN_OR_RETURN(c.num_kv_heads,
                            k.Size("attention.head_count_kv", l.num_heads, c.num_heads));
  LOCKSTEP_ASSIGN_OR_RETURN(c.max_position_embeddings, k.Size("context_length", l.max_positions));
  if (c.num_heads % c.num_kv_heads != 0) {
    return k.Error("attention.head_count_kv", std::to_string(c.num_kv_heads) +
                                                  " does not divide attention.head_count " +
                                                  std::to_string(c.num_heads));
  }
  if (k.Find("attention.key_length") != nullptr) {
    LOCKSTEP_ASSIGN_OR_RETURN(c.head_dim, k.Size("attention.key_length", l.head_dim));
  } else if (c.hidden_size % c.num_heads != 0) {
    return k.Error("attention.head_count", std::to_string(c.num_heads) +
                                               " does not divide embedding_length " +
                                               std::to_string(c.hidden_size) +
                                               " and there is no attention.key_length");
  } else {
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) {
    return k.Error("attention.key_length",
                   "head_dim " + std::to_string(c.head_dim) + " is odd; RoPE needs pairs");
  }
  LOCKSTEP_RETURN_IF_ERROR(k.SameIfPresent("attention.value_length", c.head_dim));
  return k.SameIfPresent("rope.dimension_count", c.head_dim);
}

Status ParseRope(const Keys& k, ModelConfig& c) {
  LOCKSTEP_ASSIGN_OR_RETURN(c.rms_norm_eps, k.PositiveFloat("attention.layer_norm_rms_epsilon"));
  LOCKSTEP_ASSIGN_OR_RETURN(c.rope_theta, k.PositiveFloat("rope.freq_base", 10000.0f));
  if (const GgufValue* s = k.Find("rope.scaling.type")) {
    if (s->type != GgufType::kString) return k.Error("rope.scaling.type", "is not a string");
    if (s->string != "none") {
      return UnimplementedError(k.Error("rope.scaling.type", "\"" + s->string +
                                                                 "\" (only absent or \"none\")")
                                    .message());
    }
  }
  return Status::Ok();
}

// qwen3moe's experts (E2.2, E4); norm_topk_prob absent: true.
Status ParseExperts(const Keys& k, ModelConfig& c) {
  if (c.model_type != "qwen3_moe") return Status::Ok();
  const ConfigLimits& l = kConfigLimits;
  LOCKSTEP_ASSIGN_OR_RETURN(c.moe.num_experts, k.Size("expert_count", l.num_experts));
  LOCKSTEP_ASSIGN_OR_RETURN(c.moe.experts_per_tok, k.Size("expert_used_count", l.num_experts));
  LOCKSTEP_ASSIGN_OR_RETURN(c.moe.intermediate_size,
                            k.Size("expert_feed_forward_length", l.intermediate_size));
  c.moe.norm_topk_prob = true;
  if (const GgufValue* v = k.Find("expert_weights_norm")) {
    if (v->type != GgufType::kBool) return k.Error("expert_weights_norm", "is not a bool");
    c.moe.norm_topk_prob = v->bits != 0;
  }
  return Status::Ok();
}

// vocab from token_embd.weight, tied when output.weight is absent.
Status ParseVocab(const GgufFile& f, ModelConfig& c) {
  const GgufTensor* embd = f.FindTensor("token_embd.weight");
  const std::string where = f.path() + ": tensor \"token_embd.weight\"";
  if (embd == nullptr) return InvalidError(where + " not found");
  if (embd->ne.size() != 2 || embd->ne[0] != static_cast<uint64_t>(c.hidden_size)) {
    return InvalidError(where + " is not [embedding_length, vocab]");
  }
  if (embd->ne[1] > static_cast<uint64_t>(kConfigLimits.vocab_size)) {
    return InvalidError(where + ": vocab " + std::to_string(embd->ne[1]) + " is over the limit");
  }
  c.vocab_size = static_cast<int>(embd->ne[1]);
  const GgufValue* tokens = f.Find("tokenizer.ggml.tokens");
  if (tokens != nullptr && tokens->array_size() != embd->ne[1]) {
    return InvalidError(f.path() + ": key \"tokenizer.ggml.tokens\" lists " +
                        std::to_string(tokens->array_size()) + " tokens, token_embd.weight " +
                        std::to_string(embd->ne[1]));
  }
  c.tie_word_embeddings = f.FindTensor("output.weight") == nullptr;
  return Status::Ok();
}

// rope_freqs.weight: F32, head_dim / 2 values (E2.2).
Status ReadRopeFreqs(const GgufFile& f, ModelConfig& c) {
  const GgufTensor* t = f.FindTensor(kGgufRopeFreqs);
  if (t == nullptr) return Status::Ok();
  const std::string where = f.path() + ": tensor \"" + kGgufRopeFreqs + "\"";
  if (t->dtype != DType::kF32 || t->ne.size() != 1 ||
      t->ne[0] != static_cast<uint64_t>(c.head_dim / 2)) {
    return InvalidError(where + " must be F32 with head_dim / 2 = " +
                        std::to_string(c.head_dim / 2) + " values");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, f.ReadBytes(GgufFile::Info(*t)));
  c.rope_freqs.resize(static_cast<size_t>(t->ne[0]));
  WidenToF32(DType::kF32, bytes, c.rope_freqs.data());
  return Status::Ok();
}

// tokenizer.ggml.eos_token_id, and the end-of-turn and end-of-message ids
// llama.cpp also stops at, when present: ids below 2^32.
Status ReadEos(const GgufFile& f, ModelConfig& c) {
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const GgufValue* v = f.Find(key);
    if (v == nullptr) continue;
    const std::optional<int64_t> id = v->Int();
    if (!IsGgufInteger(v->type) || !id || *id < 0 || *id > int64_t{UINT32_MAX}) {
      return InvalidError(f.path() + ": key \"" + key + "\": not a token id");
    }
    const uint32_t eos = static_cast<uint32_t>(*id);
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), eos) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(eos);
    }
  }
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ModelConfigFromGguf(const GgufFile& f) {
  ModelConfig c;
  LOCKSTEP_ASSIGN_OR_RETURN(const Arch arch, Architecture(f));
  c.model_type = arch.model_type;
  c.qk_norm = c.model_type == "qwen3" || c.model_type == "qwen3_moe";  // E3
  const Keys k(f, arch.gguf);
  LOCKSTEP_RETURN_IF_ERROR(ParseSizes(k, c));
  LOCKSTEP_RETURN_IF_ERROR(ParseExperts(k, c));
  LOCKSTEP_RETURN_IF_ERROR(ParseRope(k, c));
  LOCKSTEP_RETURN_IF_ERROR(ParseVocab(f, c));
  c.attention_bias = f.FindTensor("blk.0.attn_q.bias") != nullptr;
  c.layer_window.assign(static_cast<size_t>(c.num_layers), 0);
  LOCKSTEP_RETURN_IF_ERROR(ReadRopeFreqs(f, c));
  LOCKSTEP_RETURN_IF_ERROR(ReadEos(f, c));
  return c;
}

std::vector<std::pair<std::string, GgufValue>> GgufConfigKeys(const ModelConfig& c) {
  std::string arch = c.model_type;
  for (const Arch& known : kArchs) {
    if (c.model_type == known.model_type) arch = known.gguf;
  }
  const std::string a = arch + ".";
  auto u32 = [](int v) { return GgufU32(static_cast<uint32_t>(v)); };
  std::vector<std::pair<std::string, GgufValue>> keys = {
      {"general.architecture", GgufString(arch)},
      {a + "block_count", u32(c.num_layers)},
      {a + "context_length", u32(c.max_position_embeddings)},
      {a + "embedding_length", u32(c.hidden_size)},
      {a + "attention.head_count", u32(c.num_heads)},
      {a + "attention.head_count_kv", u32(c.num_kv_heads)},
      {a + "rope.freq_base", GgufF32(c.rope_theta)},
      {a + "attention.layer_norm_rms_epsilon", GgufF32(c.rms_norm_eps)},
      {a + "rope.dimension_count", u32(c.head_dim)},
  };
  if (c.intermediate_size > 0) keys.push_back({a + "feed_forward_length", u32(c.intermediate_size)});
  if (c.head_dim * c.num_heads != c.hidden_size) {
    keys.push_back({a + "attention.key_length", u32(c.head_dim)});
    keys.push_back({a + "attention.value_length", u32(c.head_dim)});
  }
  if (c.is_moe()) {
    keys.push_back({a + "expert_count", u32(c.moe.num_experts)});
    keys.push_back({a + "expert_used_count", u32(c.moe.experts_per_tok)});
    keys.push_back({a + "expert_feed_forward_length", u32(c.moe.intermediate_size)});
    keys.push_back({a + "expert_weights_norm", GgufBool(c.moe.norm_topk_prob)});
  }
  return keys;
}

}  // namespace lockstep
