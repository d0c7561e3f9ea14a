#include "engine/stage.h"

#include <cstring>
#include <string>

#include "engine/ops/pinned_math.h"
#include "engine/ops/rope.h"

namespace lockstep {
namespace {

// y[t] = W x[t] for n tokens, then an optional bias (§5.2, §9.1).
void Project(const ops::Kernels& k, const WeightMatrix& w, const std::vector<float>& bias,
             const float* x, size_t n, float* y) {
  k.matmul(w.data.data(), w.rows, w.cols, x, n, y);
  if (bias.empty()) return;
  for (size_t t = 0; t < n; ++t) ops::AddInPlace(y + t * w.rows, bias.data(), w.rows);
}

}  // namespace

Stage::Stage(ModelConfig config, StageWeights weights, const ops::Kernels& kernels)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      kernels_(kernels),
      inv_freq_(ops::InvFreq(config_.rope_theta, config_.head_dim)),
      attn_scale_(ops::Rsqrt(static_cast<float>(config_.head_dim))) {}

KvCache Stage::NewCache() const {
  KvCache cache(spec().lo, spec().hi, config_.head_dim, config_.num_kv_heads, inv_freq_);
  for (int l = spec().lo; l < spec().hi; ++l) {
    const size_t idx = static_cast<size_t>(l);
    if (idx < config_.layer_window.size()) (void)cache.SetWindow(l, config_.layer_window[idx]);
  }
  return cache;
}

Status Stage::Embed(std::span<const uint32_t> tokens, std::vector<float>* hidden) const {
  if (!spec().first) return InternalError("Embed called on a stage that is not first");
  const size_t h = this->hidden();
  hidden->resize(tokens.size() * h);
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (tokens[t] >= vocab()) {
      return InvalidError("token id " + std::to_string(tokens[t]) + " is outside the vocabulary (" +
                          std::to_string(vocab()) + " ids)");
    }
    std::memcpy(hidden->data() + t * h, weights_.embed.row(tokens[t]), h * sizeof(float));
  }
  return Status::Ok();
}

Status Stage::Forward(std::span<float> hidden, int64_t first_pos, KvCache& cache) const {
  const size_t h = this->hidden();
  if (hidden.size() % h != 0) return InvalidError("hidden state is not a whole number of rows");
  const size_t n = hidden.size() / h;
  const auto pos = cache.positions();
  if (!pos.empty() && first_pos <= pos.back()) {
    return InvalidError("position " + std::to_string(first_pos) +
                        " does not follow the cache's last position " + std::to_string(pos.back()));
  }
  if (first_pos < 0 || first_pos + static_cast<int64_t>(n) > (int64_t{1} << 24)) {
    return InvalidError("position " + std::to_string(first_pos) + " is out of range");
  }
  const size_t first_entry = cache.Append(n, first_pos);
  for (int l = spec().lo; l < spec().hi; ++l) Layer(l, hidden, n, first_entry, cache);
  return Status::Ok();
}

// One transformer layer over n positions (§8-§10).
void Stage::Layer(int layer, std::span<float> hidden, size_t n, size_t first_entry,
                  KvCache& cache) const {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer - spec().lo)];
  const size_t h = this->hidden();
  std::vector<float> normed(n * h);
  for (size_t t = 0; t < n; ++t) {  // §8 input_layernorm
    ops::RmsNorm(hidden.data() + t * h, w.input_norm.data(), h, config_.rms_norm_eps,
                 normed.data() + t * h);
  }
  std::vector<float> attn(n * h);
  Attention(layer, w, normed, n, first_entry, cache, attn);  // §9.1-9.4
  for (size_t t = 0; t < n; ++t) {                           // §9.5 residual
    ops::AddInPlace(hidden.data() + t * h, attn.data() + t * h, h);
  }
  Mlp(w, hidden, n);  // §10
}

void Stage::Attention(int layer, const LayerWeights& w, std::span<const float> normed, size_t n,
                      size_t first_entry, KvCache& cache, std::span<float> attn_out) const {
  const size_t hd = static_cast<size_t>(config_.head_dim);
  const size_t heads = static_cast<size_t>(config_.num_heads);
  const size_t group = heads / static_cast<size_t>(config_.num_kv_heads);
  const size_t qw = heads * hd, kvw = cache.kv_width();
  std::vector<float> q(n * qw), k(n * kvw), v(n * kvw);
  Project(kernels_, w.q_proj, w.q_bias, normed.data(), n, q.data());  // §9.1
  Project(kernels_, w.k_proj, w.k_bias, normed.data(), n, k.data());
  Project(kernels_, w.v_proj, w.v_bias, normed.data(), n, v.data());
  std::vector<float> cos_v(hd / 2), sin_v(hd / 2), mixed(qw), scores(first_entry + n);
  for (size_t t = 0; t < n; ++t) {
    const size_t e = first_entry + t;
    const int64_t pos = cache.positions()[e];
    ops::RopeAngles(inv_freq_, pos, cos_v, sin_v);  // §7.3
    std::memcpy(cache.kraw_row(layer, e), k.data() + t * kvw, kvw * sizeof(float));
    std::memcpy(cache.v_row(layer, e), v.data() + t * kvw, kvw * sizeof(float));
    std::span<float> qt(q.data() + t * qw, qw);
    ops::RotateHalf(qt, config_.head_dim, cos_v, sin_v);  // §7.4
    ops::RotateHalfFrom(std::span<const float>(k.data() + t * kvw, kvw),
                        std::span<float>(cache.k_row(layer, e), kvw), config_.head_dim, cos_v, sin_v);
    const size_t lo = cache.FirstVisible(layer, pos, e + 1);
    for (size_t qh = 0; qh < heads; ++qh) {  // §9.2-9.4, GQA kv_head = qh / group
      const size_t off = (qh / group) * hd;
      ops::AttendHead(qt.data() + qh * hd, cache.k_data(layer) + lo * kvw + off,
                      cache.v_data(layer) + lo * kvw + off, kvw, e + 1 - lo, hd, attn_scale_,
                      scores.data(), mixed.data() + qh * hd);
    }
    kernels_.matmul(w.o_proj.data.data(), w.o_proj.rows, w.o_proj.cols, mixed.data(), 1,
                    attn_out.data() + t * hidden());  // §9.5
  }
}

void Stage::Mlp(const LayerWeights& w, std::span<float> hidden, size_t n) const {
  const size_t h = this->hidden();
  const size_t inter = static_cast<size_t>(config_.intermediate_size);
  std::vector<float> normed(n * h), gate(n * inter), up(n * inter), down(n * h);
  for (size_t t = 0; t < n; ++t) {  // §8 post_attention_layernorm
    ops::RmsNorm(hidden.data() + t * h, w.post_norm.data(), h, config_.rms_norm_eps,
                 normed.data() + t * h);
  }
  kernels_.matmul(w.gate_proj.data.data(), inter, h, normed.data(), n, gate.data());
  kernels_.matmul(w.up_proj.data.data(), inter, h, normed.data(), n, up.data());
  ops::SiluMul(gate.data(), up.data(), n * inter, gate.data());
  kernels_.matmul(w.down_proj.data.data(), h, inter, gate.data(), n, down.data());
  ops::AddInPlace(hidden.data(), down.data(), n * h);
}

void Stage::Logits(std::span<const float> row, std::span<float> logits) const {
  const size_t h = hidden();
  std::vector<float> normed(h);
  ops::RmsNorm(row.data(), weights_.final_norm.data(), h, config_.rms_norm_eps, normed.data());
  const WeightMatrix& head = weights_.head();
  kernels_.matmul(head.data.data(), head.rows, head.cols, normed.data(), 1, logits.data());
}

}  // namespace lockstep
