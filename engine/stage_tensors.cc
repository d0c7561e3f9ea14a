#include "engine/stage_tensors.h"

#include <memory>
#include <set>

namespace lockstep {

std::string LayerTensorName(int layer, const char* suffix) {
  return "model.layers." + std::to_string(layer) + "." + suffix;
}

std::string ExpertTensorName(int layer, int expert, const char* suffix) {
  return LayerTensorName(layer, "mlp.experts.") + std::to_string(expert) + "." + suffix;
}

namespace {

// E4: layer l's router and experts.
void ForEachExpertTensor(const ModelConfig& c, int l, const StageTensorFn& fn) {
  const int64_t hidden = c.hidden_size, inter = c.moe.intermediate_size;
  fn(LayerTensorName(l, "mlp.gate.weight"), {c.moe.num_experts, hidden}, false);
  for (int e = 0; e < c.moe.num_experts; ++e) {
    fn(ExpertTensorName(l, e, "gate_proj.weight"), {inter, hidden}, false);
    fn(ExpertTensorName(l, e, "up_proj.weight"), {inter, hidden}, false);
    fn(ExpertTensorName(l, e, "down_proj.weight"), {hidden, inter}, false);
  }
}

}  // namespace

void ForEachLayerTensor(const ModelConfig& c, int l, const StageTensorFn& fn) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t q_width = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv_width = int64_t{c.num_kv_heads} * c.head_dim;
  fn(LayerTensorName(l, "input_layernorm.weight"), {hidden}, false);
  fn(LayerTensorName(l, "self_attn.q_proj.weight"), {q_width, hidden}, false);
  fn(LayerTensorName(l, "self_attn.k_proj.weight"), {kv_width, hidden}, false);
  fn(LayerTensorName(l, "self_attn.v_proj.weight"), {kv_width, hidden}, false);
  fn(LayerTensorName(l, "self_attn.q_proj.bias"), {q_width}, true);
  fn(LayerTensorName(l, "self_attn.k_proj.bias"), {kv_width}, true);
  fn(LayerTensorName(l, "self_attn.v_proj.bias"), {kv_width}, true);
  if (c.qk_norm) {  // E3
    fn(LayerTensorName(l, "self_attn.q_norm.weight"), {c.head_dim}, false);
    fn(LayerTensorName(l, "self_attn.k_norm.weight"), {c.head_dim}, false);
  }
  fn(LayerTensorName(l, "self_attn.o_proj.weight"), {hidden, q_width}, false);
  fn(LayerTensorName(l, "post_attention_layernorm.weight"), {hidden}, false);
  if (c.is_moe()) return ForEachExpertTensor(c, l, fn);
  fn(LayerTensorName(l, "mlp.gate_proj.weight"), {inter, hidden}, false);
  fn(LayerTensorName(l, "mlp.up_proj.weight"), {inter, hidden}, false);
  fn(LayerTensorName(l, "mlp.down_proj.weight"), {hidden, inter}, false);
}

void ForEachStageTensor(const ModelConfig& c, const StageSpec& spec, const StageTensorFn& fn) {
  const int64_t hidden = c.hidden_size, vocab = c.vocab_size;
  const bool tied = c.tie_word_embeddings;
  if (spec.first || (spec.last && tied)) fn("model.embed_tokens.weight", {vocab, hidden}, false);
  for (int l = spec.lo; l < spec.hi; ++l) ForEachLayerTensor(c, l, fn);
  if (spec.last) {
    fn("model.norm.weight", {hidden}, false);
    if (!tied) fn("lm_head.weight", {vocab, hidden}, false);
  }
}

Checkpoint::Filter StageTensorFilter(const ModelConfig& c, const StageSpec& spec) {
  auto names = std::make_shared<std::set<std::string, std::less<>>>();
  ForEachStageTensor(c, spec, [&](const std::string& name, std::vector<int64_t>, bool) {
    names->insert(name);
  });
  return [names](std::string_view name) { return names->count(name) > 0; };
}

}  // namespace lockstep
