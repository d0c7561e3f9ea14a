#include "engine/io/gguf_names.h"

#include <array>
#include <cctype>

namespace lockstep {
namespace {

struct Rename {
  std::string_view gguf;  // after "blk.{i}."
  std::string_view hf;    // after "model.layers.{i}."
};

constexpr std::array<Rename, 18> kLayerTensors = {{
    {"attn_norm.weight", "input_layernorm.weight"},
    {"ffn_norm.weight", "post_attention_layernorm.weight"},
    {"attn_q.weight", "self_attn.q_proj.weight"},
    {"attn_k.weight", "self_attn.k_proj.weight"},
    {"attn_v.weight", "self_attn.v_proj.weight"},
    {"attn_q.bias", "self_attn.q_proj.bias"},
    {"attn_k.bias", "self_attn.k_proj.bias"},
    {"attn_v.bias", "self_attn.v_proj.bias"},
    {"attn_output.weight", "self_attn.o_proj.weight"},
    {"attn_q_norm.weight", "self_attn.q_norm.weight"},
    {"attn_k_norm.weight", "self_attn.k_norm.weight"},
    {"ffn_gate.weight", "mlp.gate_proj.weight"},
    {"ffn_up.weight", "mlp.up_proj.weight"},
    {"ffn_down.weight", "mlp.down_proj.weight"},
    {"ffn_gate_inp.weight", "mlp.gate.weight"},
    // Stacks: "experts.{e}." goes between "mlp." and the rest.
    {"ffn_gate_exps.weight", "mlp.gate_proj.weight"},
    {"ffn_up_exps.weight", "mlp.up_proj.weight"},
    {"ffn_down_exps.weight", "mlp.down_proj.weight"},
}};

constexpr std::array<Rename, 4> kGlobalTensors = {{
    {"token_embd.weight", "model.embed_tokens.weight"},
    {"output_norm.weight", "model.norm.weight"},
    {"output.weight", "lm_head.weight"},
    {kGgufRopeFreqs, kGgufRopeFreqs},
}};

// "blk.{i}.rest" -> (i, rest); nullopt unless i is canonical decimal.
std::optional<std::pair<int, std::string_view>> SplitLayer(std::string_view name) {
  if (name.substr(0, 4) != "blk.") return std::nullopt;
  name.remove_prefix(4);
  size_t digits = 0;
  while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
  if (digits == 0 || digits > 6 || digits >= name.size() || name[digits] != '.') return std::nullopt;
  if (digits > 1 && name[0] == '0') return std::nullopt;
  int layer = 0;
  for (size_t i = 0; i < digits; ++i) layer = layer * 10 + (name[i] - '0');
  return std::make_pair(layer, name.substr(digits + 1));
}

const Rename* LayerRename(std::string_view rest) {
  for (const Rename& r : kLayerTensors) {
    if (r.gguf == rest) return &r;
  }
  return nullptr;
}

bool IsStack(std::string_view rest) { return rest.find("_exps.") != std::string_view::npos; }

}  // namespace

bool IsGgufTensorName(std::string_view name) {
  for (const Rename& r : kGlobalTensors) {
    if (r.gguf == name) return true;
  }
  const auto split = SplitLayer(name);
  return split && LayerRename(split->second) != nullptr;
}

std::optional<std::string> GgufNameOf(std::string_view hf) {
  for (const Rename& r : kGlobalTensors) {
    if (r.hf == hf) return std::string(r.gguf);
  }
  constexpr std::string_view kLayers = "model.layers.";
  if (hf.substr(0, kLayers.size()) != kLayers) return std::nullopt;
  const std::string as_blk = "blk." + std::string(hf.substr(kLayers.size()));
  const auto split = SplitLayer(as_blk);
  if (!split) return std::nullopt;
  for (const Rename& r : kLayerTensors) {
    if (r.hf == split->second && !IsStack(r.gguf)) {
      return "blk." + std::to_string(split->first) + "." + std::string(r.gguf);
    }
  }
  return std::nullopt;
}

std::optional<int> GgufLayerOf(std::string_view name) {
  const auto split = SplitLayer(name);
  if (!split) return std::nullopt;
  return split->first;
}

namespace {

Status CheckPermutable(const TensorInfo& t, int heads, const std::string& where) {
  const uint64_t rows = RowsOf(t);
  if (heads <= 0 || rows % static_cast<uint64_t>(heads) != 0 ||
      (rows / static_cast<uint64_t>(heads)) % 2 != 0) {
    return InvalidError(where + ": its " + std::to_string(rows) + " rows do not split into " +
                        std::to_string(heads) + " heads of even size (E2.2 un-permute)");
  }
  return Status::Ok();
}

// The E matrices of a stack ne = [in, out, E].
Status AddStack(const GgufTensor& g, int layer, std::string_view hf_rest,
                const std::string& where, std::vector<HfTensor>& out) {
  if (g.ne.size() != 3) {
    return InvalidError(where + ": an expert stack must have 3 dimensions [in, out, E], has " +
                        std::to_string(g.ne.size()));
  }
  const uint64_t matrix_bytes = g.nbytes / g.ne[2];
  const std::string mlp = "model.layers." + std::to_string(layer) + ".mlp.";
  for (uint64_t e = 0; e < g.ne[2]; ++e) {
    TensorInfo info{mlp + "experts." + std::to_string(e) + "." + std::string(hf_rest.substr(4)),
                    g.dtype,
                    {static_cast<int64_t>(g.ne[1]), static_cast<int64_t>(g.ne[0])},
                    g.offset + e * matrix_bytes,
                    matrix_bytes};
    out.push_back({std::move(info), g.name});
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<HfTensor>> HfTensorsOf(const GgufFile& file, const ModelConfig& config) {
  std::vector<HfTensor> out;
  const bool llama = config.model_type == "llama";
  for (const GgufTensor& g : file.tensors()) {
    const std::string where = file.path() + ": tensor \"" + g.name + "\"";
    TensorInfo info = GgufFile::Info(g);
    const auto split = SplitLayer(g.name);
    if (!split) {
      for (const Rename& r : kGlobalTensors) {
        if (r.gguf == g.name) info.name = std::string(r.hf);
      }
      out.push_back({std::move(info), g.name});
      continue;
    }
    const auto [layer, rest] = *split;
    if (layer >= config.num_layers) {
      return InvalidError(where + ": layer " + std::to_string(layer) + " is past block_count " +
                          std::to_string(config.num_layers));
    }
    const Rename* r = LayerRename(rest);
    if (IsStack(rest)) {
      LOCKSTEP_RETURN_IF_ERROR(AddStack(g, layer, r->hf, where, out));
      continue;
    }
    info.name = "model.layers." + std::to_string(layer) + "." + std::string(r->hf);
    if (llama && (rest.substr(0, 7) == "attn_q." || rest.substr(0, 7) == "attn_k.")) {
      info.permuted_heads = rest[5] == 'q' ? config.num_heads : config.num_kv_heads;
      LOCKSTEP_RETURN_IF_ERROR(CheckPermutable(info, info.permuted_heads, where));
    }
    out.push_back({std::move(info), g.name});
  }
  return out;
}

}  // namespace lockstep
