#include "reference.h"

#include <algorithm>
#include <cassert>
#include <cstring>
#include <limits>

#include "engine/ops/kernels.h"
#include "engine/ops/pinned_math.h"
#include "engine/ops/rope.h"
#include "engine/rope_table.h"

namespace lockstep::kvtest {
namespace {

// §5.2 matvec, plus the §9.1 bias when present.
std::vector<float> MatVec(const RefLinear& m, const float* x) {
  std::vector<float> y(m.rows);
  for (size_t r = 0; r < m.rows; ++r) {
    float acc = 0.0f;
    for (size_t i = 0; i < m.cols; ++i) {
      const float p = m.w[r * m.cols + i] * x[i];
      acc = acc + p;
    }
    y[r] = m.bias.empty() ? acc : acc + m.bias[r];
  }
  return y;
}

Result<std::vector<float>> Read(const Checkpoint& f, const std::string& name,
                                std::initializer_list<int64_t> shape) {
  return f.ReadF32(name, shape);
}

Result<RefLinear> ReadLinear(const Checkpoint& f, const std::string& name, int rows,
                             int cols, bool bias) {
  RefLinear m;
  m.rows = static_cast<size_t>(rows);
  m.cols = static_cast<size_t>(cols);
  LOCKSTEP_ASSIGN_OR_RETURN(m.w, Read(f, name + ".weight", {rows, cols}));
  if (bias && f.Find(name + ".bias").file != nullptr) {
    LOCKSTEP_ASSIGN_OR_RETURN(m.bias, Read(f, name + ".bias", {rows}));
  }
  return m;
}

Result<RefLayer> ReadLayer(const Checkpoint& f, const ModelConfig& c, int l) {
  const std::string p = "model.layers." + std::to_string(l) + ".";
  const int h = c.hidden_size, qw = c.num_heads * c.head_dim, kvw = c.num_kv_heads * c.head_dim;
  RefLayer r;
  LOCKSTEP_ASSIGN_OR_RETURN(r.input_norm, Read(f, p + "input_layernorm.weight", {h}));
  LOCKSTEP_ASSIGN_OR_RETURN(r.post_norm, Read(f, p + "post_attention_layernorm.weight", {h}));
  LOCKSTEP_ASSIGN_OR_RETURN(r.q, ReadLinear(f, p + "self_attn.q_proj", qw, h, true));
  LOCKSTEP_ASSIGN_OR_RETURN(r.k, ReadLinear(f, p + "self_attn.k_proj", kvw, h, true));
  LOCKSTEP_ASSIGN_OR_RETURN(r.v, ReadLinear(f, p + "self_attn.v_proj", kvw, h, true));
  LOCKSTEP_ASSIGN_OR_RETURN(r.o, ReadLinear(f, p + "self_attn.o_proj", h, qw, false));
  if (c.qk_norm) {
    LOCKSTEP_ASSIGN_OR_RETURN(r.q_norm, Read(f, p + "self_attn.q_norm.weight", {c.head_dim}));
    LOCKSTEP_ASSIGN_OR_RETURN(r.k_norm, Read(f, p + "self_attn.k_norm.weight", {c.head_dim}));
  }
  if (c.moe.num_experts > 0) {
    const int inter = c.moe.intermediate_size;
    LOCKSTEP_ASSIGN_OR_RETURN(r.router, ReadLinear(f, p + "mlp.gate", c.moe.num_experts, h, false));
    for (int e = 0; e < c.moe.num_experts; ++e) {
      const std::string x = p + "mlp.experts." + std::to_string(e) + ".";
      RefExpert ex;
      LOCKSTEP_ASSIGN_OR_RETURN(ex.gate, ReadLinear(f, x + "gate_proj", inter, h, false));
      LOCKSTEP_ASSIGN_OR_RETURN(ex.up, ReadLinear(f, x + "up_proj", inter, h, false));
      LOCKSTEP_ASSIGN_OR_RETURN(ex.down, ReadLinear(f, x + "down_proj", h, inter, false));
      r.experts.push_back(std::move(ex));
    }
    return r;
  }
  const int inter = c.intermediate_size;
  LOCKSTEP_ASSIGN_OR_RETURN(r.gate, ReadLinear(f, p + "mlp.gate_proj", inter, h, false));
  LOCKSTEP_ASSIGN_OR_RETURN(r.up, ReadLinear(f, p + "mlp.up_proj", inter, h, false));
  LOCKSTEP_ASSIGN_OR_RETURN(r.down, ReadLinear(f, p + "mlp.down_proj", h, inter, false));
  return r;
}

// §10's SwiGLU of x.
std::vector<float> SwiGlu(const RefLinear& gate, const RefLinear& up, const RefLinear& down,
                          const float* x) {
  const std::vector<float> g = MatVec(gate, x);
  const std::vector<float> u = MatVec(up, x);
  std::vector<float> act(g.size());
  for (size_t i = 0; i < act.size(); ++i) act[i] = ops::Silu(g[i]) * u[i];
  return MatVec(down, act.data());
}

// E3: each head_dim slice of `v` through §8 RMSNorm with `w`.
void NormHeads(std::vector<float>& v, const std::vector<float>& w, float eps) {
  if (w.empty()) return;
  std::vector<float> out(w.size());
  for (size_t at = 0; at < v.size(); at += w.size()) {
    ops::RmsNorm(v.data() + at, w.data(), w.size(), eps, out.data());
    std::copy(out.begin(), out.end(), v.begin() + static_cast<ptrdiff_t>(at));
  }
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

}  // namespace

Result<RefWeights> LoadRefWeights(const Checkpoint& f, const ModelConfig& c) {
  RefWeights w;
  LOCKSTEP_ASSIGN_OR_RETURN(
      w.embed, ReadLinear(f, "model.embed_tokens", c.vocab_size, c.hidden_size, false));
  for (int l = 0; l < c.num_layers; ++l) {
    LOCKSTEP_ASSIGN_OR_RETURN(RefLayer layer, ReadLayer(f, c, l));
    w.layers.push_back(std::move(layer));
  }
  LOCKSTEP_ASSIGN_OR_RETURN(w.final_norm, Read(f, "model.norm.weight", {c.hidden_size}));
  if (!c.tie_word_embeddings) {
    LOCKSTEP_ASSIGN_OR_RETURN(w.lm_head,
                              ReadLinear(f, "lm_head", c.vocab_size, c.hidden_size, false));
  }
  return w;
}

void RopeRow(const float* in, float* out, size_t width, size_t head_dim, int64_t pos,
             std::span<const float> inv_freq) {
  const size_t half = head_dim / 2;
  for (size_t h = 0; h < width / head_dim; ++h) {
    const float* x = in + h * head_dim;
    float* y = out + h * head_dim;
    for (size_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq[i];  // §7.3
      float s, c;
      ops::SinCosPinned(angle, &s, &c);
      const float x1 = x[i], x2 = x[i + half];
      y[i] = x1 * c + (-x2) * s;  // §7.4, separate mul and add (no contraction)
      y[i + half] = x2 * c + x1 * s;
    }
  }
}

RefModel::RefModel(const ModelConfig& config, const RefWeights& weights)
    : c_(config),
      w_(weights),
      inv_freq_(ModelInvFreq(config)),
      hd_(static_cast<size_t>(config.head_dim)),
      kvw_(static_cast<size_t>(config.num_kv_heads) * hd_),
      qw_(static_cast<size_t>(config.num_heads) * hd_) {}

RefCache RefModel::Empty() const {
  RefCache c;
  c.k.resize(w_.layers.size());
  c.kraw.resize(w_.layers.size());
  c.v.resize(w_.layers.size());
  return c;
}

std::vector<int> RefModel::NoWindows() const { return std::vector<int>(w_.layers.size(), 0); }
std::vector<int> RefModel::Windows(int w) const { return std::vector<int>(w_.layers.size(), w); }

// §9.2-9.4 for every query head, scoring all cached entries; entries
// outside the window get -inf before the softmax.
void RefModel::Attend(const RefCache& cache, size_t layer, const float* q, int window,
                      int64_t pos, float* out) const {
  const size_t n = cache.pos.size();
  const size_t group = static_cast<size_t>(c_.num_heads / c_.num_kv_heads);
  const float scale = ops::Rsqrt(static_cast<float>(hd_));
  std::vector<float> p(n);
  for (size_t qh = 0; qh < static_cast<size_t>(c_.num_heads); ++qh) {
    const size_t off = (qh / group) * hd_;
    for (size_t j = 0; j < n; ++j) {
      const bool masked = window > 0 && cache.pos[j] < pos - window + 1;
      const float d = ops::DotSeq(q + qh * hd_, cache.k[layer].data() + j * kvw_ + off, hd_);
      p[j] = masked ? -std::numeric_limits<float>::infinity() : d * scale;
    }
    float max_v = p[0];
    for (size_t j = 1; j < n; ++j) max_v = p[j] > max_v ? p[j] : max_v;
    float denom = 0.0f;
    for (size_t j = 0; j < n; ++j) {
      p[j] = ops::ExpPinned(p[j] - max_v);
      denom = denom + p[j];
    }
    for (size_t j = 0; j < n; ++j) p[j] = p[j] / denom;
    for (size_t d = 0; d < hd_; ++d) {
      float acc = 0.0f;
      for (size_t j = 0; j < n; ++j) {
        const float t = p[j] * cache.v[layer][j * kvw_ + off + d];
        acc = acc + t;
      }
      out[qh * hd_ + d] = acc;
    }
  }
}

void RefModel::LayerStep(RefCache& cache, size_t l, int64_t pos, int window,
                         std::vector<float>& h) const {
  const RefLayer& lw = w_.layers[l];
  const size_t hidden = h.size();
  std::vector<float> x(hidden);
  ops::RmsNorm(h.data(), lw.input_norm.data(), hidden, c_.rms_norm_eps, x.data());  // §8
  std::vector<float> q = MatVec(lw.q, x.data());                                    // §9.1
  std::vector<float> kraw = MatVec(lw.k, x.data());
  NormHeads(q, lw.q_norm, c_.rms_norm_eps);  // E3
  NormHeads(kraw, lw.k_norm, c_.rms_norm_eps);
  const std::vector<float> v = MatVec(lw.v, x.data());
  std::vector<float> k(kvw_), qr(qw_);
  RopeRow(q.data(), qr.data(), qw_, hd_, pos, inv_freq_);
  RopeRow(kraw.data(), k.data(), kvw_, hd_, pos, inv_freq_);
  cache.k[l].insert(cache.k[l].end(), k.begin(), k.end());
  cache.kraw[l].insert(cache.kraw[l].end(), kraw.begin(), kraw.end());
  cache.v[l].insert(cache.v[l].end(), v.begin(), v.end());
  std::vector<float> mixed(qw_);
  Attend(cache, l, qr.data(), window, pos, mixed.data());
  const std::vector<float> o = MatVec(lw.o, mixed.data());  // §9.5
  for (size_t i = 0; i < hidden; ++i) h[i] = h[i] + o[i];
  ops::RmsNorm(h.data(), lw.post_norm.data(), hidden, c_.rms_norm_eps, x.data());  // §10
  const std::vector<float> down =
      lw.experts.empty() ? SwiGlu(lw.gate, lw.up, lw.down, x.data()) : Experts(lw, x.data());
  for (size_t i = 0; i < hidden; ++i) h[i] = h[i] + down[i];
}

// E4: softmax of the router's logits, the k most probable experts (a
// stable sort by descending probability: ties keep the lower index), their
// weights, and y summed from +0 over them in ascending index.
std::vector<float> RefModel::Experts(const RefLayer& lw, const float* x) const {
  std::vector<float> p = MatVec(lw.router, x);
  float max_v = p[0];
  for (float v : p) max_v = v > max_v ? v : max_v;
  float denom = 0.0f;
  for (float& v : p) {
    v = ops::ExpPinned(v - max_v);
    denom = denom + v;
  }
  for (float& v : p) v = v / denom;
  std::vector<size_t> order(p.size());
  for (size_t e = 0; e < order.size(); ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] > p[b]; });
  std::vector<size_t> top(order.begin(), order.begin() + c_.moe.experts_per_tok);
  std::sort(top.begin(), top.end());
  float sum = 0.0f;
  for (size_t e : top) sum = sum + p[e];
  std::vector<float> y(static_cast<size_t>(c_.hidden_size), 0.0f);
  for (size_t e : top) {
    const float w = c_.moe.norm_topk_prob ? p[e] / sum : p[e];
    const RefExpert& ex = lw.experts[e];
    const std::vector<float> out = SwiGlu(ex.gate, ex.up, ex.down, x);
    for (size_t i = 0; i < y.size(); ++i) {
      const float t = w * out[i];
      y[i] = y[i] + t;
    }
  }
  return y;
}

std::vector<float> RefModel::Step(RefCache& cache, uint32_t token, int64_t pos,
                                  std::span<const int> windows) const {
  const size_t hidden = static_cast<size_t>(c_.hidden_size);
  const float* row = w_.embed.w.data() + token * hidden;
  std::vector<float> h(row, row + hidden);  // §2.5
  cache.pos.push_back(pos);
  for (size_t l = 0; l < w_.layers.size(); ++l) LayerStep(cache, l, pos, windows[l], h);
  std::vector<float> normed(hidden);
  ops::RmsNorm(h.data(), w_.final_norm.data(), hidden, c_.rms_norm_eps, normed.data());  // §11.1
  return MatVec(w_.head(), normed.data());
}

std::vector<std::vector<float>> RefModel::Run(RefCache& cache, std::span<const uint32_t> tokens,
                                              int64_t first_pos,
                                              std::span<const int> windows) const {
  std::vector<std::vector<float>> out;
  for (size_t t = 0; t < tokens.size(); ++t) {
    out.push_back(Step(cache, tokens[t], first_pos + static_cast<int64_t>(t), windows));
  }
  return out;
}

void RefEvict(RefCache& cache, size_t from, size_t count, size_t head_dim,
              std::span<const float> inv_freq) {
  const size_t n = cache.pos.size();
  assert(count > 0 && from + count <= n);
  const size_t w = cache.k.empty() || n == 0 ? 0 : cache.k[0].size() / n;
  cache.pos.erase(cache.pos.begin() + from, cache.pos.begin() + from + count);
  for (size_t e = 0; e < cache.pos.size(); ++e) cache.pos[e] = static_cast<int64_t>(e);
  for (size_t l = 0; l < cache.k.size(); ++l) {
    for (auto* t : {&cache.k[l], &cache.kraw[l], &cache.v[l]}) {
      t->erase(t->begin() + from * w, t->begin() + (from + count) * w);
    }
    for (size_t e = 0; e < cache.pos.size(); ++e) {
      RopeRow(cache.kraw[l].data() + e * w, cache.k[l].data() + e * w, w, head_dim,
              cache.pos[e], inv_freq);
    }
  }
}

std::string CompareWithRef(const RefCache& ref, const KvCache& cache, size_t head_dim) {
  if (!std::equal(ref.pos.begin(), ref.pos.end(), cache.positions().begin(),
                  cache.positions().end())) {
    return "positions differ";
  }
  const size_t w = cache.kv_width(), heads = w / head_dim;
  for (int l = cache.lo(); l < cache.hi(); ++l) {
    const size_t rl = static_cast<size_t>(l);
    const std::vector<float>* want[3] = {&ref.k[rl], &ref.kraw[rl], &ref.v[rl]};
    std::vector<float> k(w), v(w);
    const std::vector<float> rows[3] = {[&] {  // K and V unpacked entry by entry
      std::vector<float> out;
      for (size_t e = 0; e < cache.size(); ++e) {
        cache.GetK(l, e, k.data());
        out.insert(out.end(), k.begin(), k.end());
      }
      return out;
    }(), std::vector<float>(cache.kraw_data(l), cache.kraw_data(l) + cache.size() * w), [&] {
      std::vector<float> out;
      for (size_t e = 0; e < cache.size(); ++e) {
        cache.GetV(l, e, v.data());
        out.insert(out.end(), v.begin(), v.end());
      }
      return out;
    }()};
    const float* got[3] = {rows[0].data(), rows[1].data(), rows[2].data()};
    const char* names[3] = {"K", "Kraw", "V"};
    for (int t = 0; t < 3; ++t) {
      for (size_t e = 0; e < ref.pos.size(); ++e)
        for (size_t kvh = 0; kvh < heads; ++kvh)
          for (size_t d = 0; d < head_dim; ++d) {
            const size_t slot = e * w + kvh * head_dim + d;  // the documented layout
            if (FloatBits(got[t][slot]) == FloatBits((*want[t])[slot])) continue;
            return std::string(names[t]) + " differs at layer " + std::to_string(l) +
                   " entry " + std::to_string(e) + " kv head " + std::to_string(kvh) +
                   " lane " + std::to_string(d);
          }
    }
  }
  return "";
}

}  // namespace lockstep::kvtest
