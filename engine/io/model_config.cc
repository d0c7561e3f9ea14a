#include "engine/io/model_config.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "base/json.h"
#include "engine/io/sliding_window.h"

namespace lockstep {
namespace {

using nlohmann::json;

constexpr const char* kQwen3 = "qwen3";
constexpr const char* kQwen3Moe = "qwen3_moe";
constexpr int kQwen3DefaultHeadDim = 128;

// Typed access to the top-level fields of one config object.
class Fields {
 public:
  Fields(const json& root, const std::string& source) : root_(root), source_(source) {}

  bool Has(const char* key) const {
    return root_.contains(key) && !root_[key].is_null();
  }
  Status Error(const char* key, const std::string& what) const {
    return InvalidError(source_ + ": field \"" + key + "\": " + what);
  }
  Status Unsupported(const char* key, const std::string& what) const {
    return UnimplementedError(source_ + ": field \"" + key + "\": " + what);
  }

  // A JSON integer in [1, max] (kConfigLimits: checked before anything
  // sized by it is allocated).
  Result<int> PositiveInt(const char* key, int max) const {
    if (!Has(key)) return Error(key, "missing");
    const json& v = root_[key];
    if (!v.is_number_integer()) return Error(key, "is not an integer: " + v.dump());
    if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 ||
        v.get<uint64_t>() > static_cast<uint64_t>(max)) {
      return Error(key, "must be in [1, " + std::to_string(max) + "], got " + v.dump());
    }
    return static_cast<int>(v.get<uint64_t>());
  }

  // JSON number -> f64 -> f32 (one RNE rounding, §2.3); positive, finite.
  Result<float> PositiveFloat(const char* key) const {
    if (!Has(key)) return Error(key, "missing");
    const json& v = root_[key];
    if (!v.is_number()) return Error(key, "is not a number");
    float f = static_cast<float>(v.get<double>());
    if (!(f > 0.0f) || !std::isfinite(f)) {
      return Error(key, "must be positive and finite as f32");
    }
    return f;
  }

  Result<bool> Bool(const char* key, bool if_absent) const {
    if (!Has(key)) return if_absent;
    if (!root_[key].is_boolean()) return Error(key, "is not true/false");
    return root_[key].get<bool>();
  }

  Result<std::string> String(const char* key, const char* if_absent) const {
    if (!Has(key)) return std::string(if_absent);
    if (!root_[key].is_string()) return Error(key, "is not a string");
    return root_[key].get<std::string>();
  }

  const json& root() const { return root_; }
  const std::string& source() const { return source_; }

 private:
  const json& root_;
  const std::string& source_;
};

Status ParseSizes(const Fields& f, ModelConfig& c) {
  const ConfigLimits& l = kConfigLimits;
  LOCKSTEP_ASSIGN_OR_RETURN(c.hidden_size, f.PositiveInt("hidden_size", l.hidden_size));
  if (c.model_type != kQwen3Moe || f.Has("intermediate_size")) {  // unused by E4's layers
    LOCKSTEP_ASSIGN_OR_RETURN(c.intermediate_size,
                              f.PositiveInt("intermediate_size", l.intermediate_size));
  }
  LOCKSTEP_ASSIGN_OR_RETURN(c.num_layers, f.PositiveInt("num_hidden_layers", l.num_layers));
  LOCKSTEP_ASSIGN_OR_RETURN(c.num_heads, f.PositiveInt("num_attention_heads", l.num_heads));
  c.num_kv_heads = c.num_heads;
  if (f.Has("num_key_value_heads")) {
    LOCKSTEP_ASSIGN_OR_RETURN(c.num_kv_heads, f.PositiveInt("num_key_value_heads", l.num_heads));
  }
  LOCKSTEP_ASSIGN_OR_RETURN(c.vocab_size, f.PositiveInt("vocab_size", l.vocab_size));
  LOCKSTEP_ASSIGN_OR_RETURN(c.max_position_embeddings,
                            f.PositiveInt("max_position_embeddings", l.max_positions));
  return Status::Ok();
}

Status ParseHeads(const Fields& f, ModelConfig& c) {
  if (c.num_heads % c.num_kv_heads != 0) {
    return f.Error("num_key_value_heads",
                   std::to_string(c.num_kv_heads) + " does not divide num_attention_heads " +
                       std::to_string(c.num_heads));
  }
  if (f.Has("head_dim")) {
    LOCKSTEP_ASSIGN_OR_RETURN(c.head_dim, f.PositiveInt("head_dim", kConfigLimits.head_dim));
  } else if (c.qk_norm) {
    c.head_dim = kQwen3DefaultHeadDim;  // E3: HF's Qwen3 default, not hidden/heads
  } else if (c.hidden_size % c.num_heads != 0) {
    return f.Error("num_attention_heads",
                   std::to_string(c.num_heads) + " does not divide hidden_size " +
                       std::to_string(c.hidden_size) + " and there is no head_dim");
  } else {
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) {
    return f.Error("head_dim", std::to_string(c.head_dim) + " is odd; RoPE needs pairs");
  }
  return Status::Ok();
}

// Features we compute exactly one way; anything else is refused.
Status CheckSupported(const Fields& f) {
  Result<std::string> act = f.String("hidden_act", "silu");
  if (!act.ok()) return act.status();
  if (*act != "silu") return f.Unsupported("hidden_act", "\"" + *act + "\" (only silu)");
  LOCKSTEP_ASSIGN_OR_RETURN(bool interleaved, f.Bool("rope_interleaved", false));
  if (interleaved) return f.Unsupported("rope_interleaved", "interleaved RoPE");
  return Status::Ok();
}

// model_type, and `architectures` agreeing with it where a class names a
// family computed differently (E3/E4); qk_norm follows.
Status ParseArchitecture(const Fields& f, ModelConfig& c) {
  LOCKSTEP_ASSIGN_OR_RETURN(c.model_type, f.String("model_type", ""));
  static constexpr std::pair<const char*, const char*> kClasses[] = {
      {"Qwen3ForCausalLM", kQwen3}, {"Qwen3MoeForCausalLM", kQwen3Moe}};
  if (f.Has("architectures")) {
    const json& a = f.root()["architectures"];
    if (!a.is_array()) return f.Error("architectures", "is not an array");
    for (const json& name : a) {
      if (!name.is_string()) return f.Error("architectures", "holds a non-string " + name.dump());
      for (const auto& [cls, type] : kClasses) {
        if (name.get<std::string>() != cls) continue;
        if (c.model_type.empty()) c.model_type = type;
        if (c.model_type != type) {
          return f.Error("architectures", std::string(cls) + " is not model_type \"" +
                                              c.model_type + "\" (it is \"" + type + "\")");
        }
      }
    }
  }
  c.qk_norm = c.model_type == kQwen3 || c.model_type == kQwen3Moe;
  return Status::Ok();
}

// E4's fields on a qwen3_moe config (ignored on any other): every layer
// sparse, 1 <= k <= E, and no more expert tensors than the limits allow.
Status ParseMoe(const Fields& f, ModelConfig& c) {
  if (c.model_type != kQwen3Moe) return Status::Ok();
  const ConfigLimits& l = kConfigLimits;
  MoeConfig& m = c.moe;
  LOCKSTEP_ASSIGN_OR_RETURN(m.num_experts, f.PositiveInt("num_experts", l.num_experts));
  LOCKSTEP_ASSIGN_OR_RETURN(m.experts_per_tok,
                            f.PositiveInt("num_experts_per_tok", l.num_experts));
  if (m.experts_per_tok > m.num_experts) {
    return f.Error("num_experts_per_tok", std::to_string(m.experts_per_tok) +
                                              " is more than num_experts " +
                                              std::to_string(m.num_experts));
  }
  if (int64_t{m.num_experts} * c.num_layers > l.expert_layers) {
    return f.Error("num_experts", std::to_string(m.num_experts) + " experts on each of " +
                                      std::to_string(c.num_layers) + " layers is over the limit of " +
                                      std::to_string(l.expert_layers) + " expert layers");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(m.intermediate_size,
                            f.PositiveInt("moe_intermediate_size", l.intermediate_size));
  LOCKSTEP_ASSIGN_OR_RETURN(m.norm_topk_prob, f.Bool("norm_topk_prob", false));
  if (f.Has("decoder_sparse_step")) {
    LOCKSTEP_ASSIGN_OR_RETURN(int step, f.PositiveInt("decoder_sparse_step", l.num_layers));
    if (step != 1) return f.Unsupported("decoder_sparse_step", std::to_string(step) + " (only 1: every layer sparse)");
  }
  if (f.Has("mlp_only_layers")) {
    const json& dense = f.root()["mlp_only_layers"];
    if (!dense.is_array()) return f.Error("mlp_only_layers", "is not an array");
    if (!dense.empty()) {
      return f.Unsupported("mlp_only_layers", dense.dump() + " (every layer must be sparse)");
    }
  }
  return Status::Ok();
}

// rope_scaling: null/absent, or {"rope_type" (or "type"): "llama3", ...}.
Result<std::optional<Llama3RopeScaling>> ParseRopeScaling(const Fields& f) {
  if (!f.Has("rope_scaling")) return std::optional<Llama3RopeScaling>();
  const json& r = f.root()["rope_scaling"];
  const std::string shown = r.dump(-1, ' ', true);
  if (!r.is_object()) return f.Error("rope_scaling", "is not an object: " + shown);
  const char* type_key = r.contains("rope_type") ? "rope_type" : "type";
  if (!r.contains(type_key) || !r[type_key].is_string() ||
      r[type_key].get<std::string>() != "llama3") {
    return f.Unsupported("rope_scaling", shown + " (only rope_type \"llama3\")");
  }
  Llama3RopeScaling s;
  const std::pair<const char*, double*> keys[] = {
      {"factor", &s.factor},
      {"low_freq_factor", &s.low_freq_factor},
      {"high_freq_factor", &s.high_freq_factor},
      {"original_max_position_embeddings", &s.original_max_position_embeddings}};
  for (const auto& [key, slot] : keys) {
    if (!r.contains(key) || !r[key].is_number()) {
      return f.Error("rope_scaling", std::string("\"") + key + "\" is missing or not a number");
    }
    *slot = r[key].get<double>();
    if (!std::isfinite(*slot) || !(*slot > 0)) {
      return f.Error("rope_scaling", std::string("\"") + key + "\" must be positive and finite");
    }
  }
  if (!(s.low_freq_factor < s.high_freq_factor)) {
    return f.Error("rope_scaling", "low_freq_factor must be below high_freq_factor");
  }
  return std::optional<Llama3RopeScaling>(s);
}

// eos_token_id: absent/null, an id, or a list of ids (each below 2^32).
Result<std::vector<uint32_t>> ParseEos(const Fields& f) {
  std::vector<uint32_t> ids;
  if (!f.Has("eos_token_id")) return ids;
  const json& e = f.root()["eos_token_id"];
  const json list = e.is_array() ? e : json::array({e});
  for (const json& v : list) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX) {
      return f.Error("eos_token_id", "must be a token id or a list of them, got " + e.dump());
    }
    ids.push_back(static_cast<uint32_t>(v.get<uint64_t>()));
  }
  return ids;
}

}  // namespace

Result<ModelConfig> ParseModelConfig(std::string_view json_text,
                                     const std::string& source_name) {
  LOCKSTEP_ASSIGN_OR_RETURN(json root,
                            ParseJsonStrict(json_text, source_name, ErrorKind::kInvalid));
  if (!root.is_object()) return InvalidError(source_name + ": not a JSON object");
  Fields f(root, source_name);
  ModelConfig c;
  LOCKSTEP_RETURN_IF_ERROR(ParseArchitecture(f, c));
  LOCKSTEP_RETURN_IF_ERROR(CheckSupported(f));
  LOCKSTEP_RETURN_IF_ERROR(ParseSizes(f, c));
  LOCKSTEP_RETURN_IF_ERROR(ParseHeads(f, c));
  LOCKSTEP_RETURN_IF_ERROR(ParseMoe(f, c));
  LOCKSTEP_ASSIGN_OR_RETURN(c.rms_norm_eps, f.PositiveFloat("rms_norm_eps"));
  LOCKSTEP_ASSIGN_OR_RETURN(c.rope_theta, f.PositiveFloat("rope_theta"));
  LOCKSTEP_ASSIGN_OR_RETURN(c.tie_word_embeddings, f.Bool("tie_word_embeddings", false));
  LOCKSTEP_ASSIGN_OR_RETURN(c.attention_bias, f.Bool("attention_bias", false));
  LOCKSTEP_ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(f));
  LOCKSTEP_ASSIGN_OR_RETURN(c.eos_token_ids, ParseEos(f));
  LOCKSTEP_ASSIGN_OR_RETURN(c.layer_window,
                            ParseLayerWindows(root, c.num_layers, source_name));
  return c;
}

Result<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    int err = errno;
    std::string msg = path + ": cannot open: " + std::strerror(err);
    return err == ENOENT ? NotFoundError(msg) : IoError(msg);
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return IoError(path + ": read failed");
  return text.str();
}

Result<ModelConfig> LoadModelConfig(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseModelConfig(text, path);
}

}  // namespace lockstep
