#include "engine/stage.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "engine/matmul_units.h"
#include "engine/ops/pinned_math.h"
#include "engine/ops/rope.h"
#include "engine/rope_table.h"

namespace lockstep {
namespace {

// Packs a row-major matrix (WeightFormat::kF32Rows) and drops the rows.
void Pack(WeightMatrix& m) {
  if (!m.packed.empty() || m.rows == 0) return;
  m.packed = ops::PackedMatrix::FromF32(m.data.data(), m.rows, m.cols);
  m.data = std::vector<float>();
}

void PackAll(StageWeights& w) {
  Pack(w.embed);
  Pack(w.lm_head);
  for (LayerWeights& l : w.layers) ForEachMatrix(l, Pack);
}

void AddBias(const std::vector<float>& bias, float* y, size_t n) {
  if (bias.empty()) return;
  for (size_t t = 0; t < n; ++t) ops::AddInPlace(y + t * bias.size(), bias.data(), bias.size());
}

// E3: §8 RMSNorm of each head_dim slice of one row's heads, in place.
void HeadNorms(float* row, size_t width, const std::vector<float>& weight, float eps) {
  const size_t hd = weight.size();
  for (size_t at = 0; at < width; at += hd) ops::RmsNorm(row + at, weight.data(), hd, eps, row + at);
}

}  // namespace

Stage::Stage(ModelConfig config, StageWeights weights, const ops::Kernels& kernels)
    : Stage(std::move(config), std::move(weights), kernels, StageOptions{}) {}

Stage::Stage(ModelConfig config, StageWeights weights, const ops::Kernels& kernels,
             StageOptions options)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      kernels_(kernels),
      pool_(options.pool),
      inv_freq_(ModelInvFreq(config_)),
      attn_scale_(ops::Rsqrt(static_cast<float>(config_.head_dim))) {
  PackAll(weights_);
  weight_bytes_ = WeightBytesPerToken(weights_);
}

KvCache Stage::NewCache() const {
  KvCache cache(spec().lo, spec().hi, config_.head_dim, config_.num_kv_heads, inv_freq_);
  for (int l = spec().lo; l < spec().hi; ++l) {
    const size_t idx = static_cast<size_t>(l);
    if (idx < config_.layer_window.size()) (void)cache.SetWindow(l, config_.layer_window[idx]);
  }
  return cache;
}

KvCache Stage::NewCache(size_t entries) const {
  KvCache cache = NewCache();
  if (entries > 0) {  // grow every buffer once, then empty it (capacity stays)
    cache.Append(entries, 0);
    (void)cache.Evict(0, entries);
  }
  return cache;
}

ForwardScratch Stage::NewScratch(size_t max_tokens, size_t max_keys) const {
  ForwardScratch s;
  s.rows.reserve(max_tokens);
  Reserve(s, max_tokens, max_keys);
  return s;
}

void Stage::Reserve(ForwardScratch& s, size_t n, size_t max_keys) const {
  const size_t h = hidden(), hd = static_cast<size_t>(config_.head_dim);
  const size_t qw = static_cast<size_t>(config_.num_heads) * hd;
  const size_t kvw = static_cast<size_t>(config_.num_kv_heads) * hd;
  const size_t inter = static_cast<size_t>(config_.intermediate_size);
  FitScratch(s.rope, n * hd);
  FitScratch(s.normed, n * h);
  FitScratch(s.q, n * qw);
  FitScratch(s.k, n * kvw);
  FitScratch(s.v, n * kvw);
  FitScratch(s.mixed, n * qw);
  FitScratch(s.attn, n * h);
  FitScratch(s.gate, n * inter);
  FitScratch(s.up, n * inter);
  FitScratch(s.batch, n * h);
  s.moe.Reserve(n, config_);
  const size_t stride = (max_keys + ops::kKvTile - 1) / ops::kKvTile * ops::kKvTile;
  if (stride > s.key_stride) {  // AttendAll's rows: see AttendRows and AttendSplit
    const size_t group = static_cast<size_t>(config_.num_heads / config_.num_kv_heads);
    s.key_stride = stride;
    s.scores.assign(2 * threads() * group * stride, 0.0f);
  }
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
    weights_.embed.packed.CopyRow(tokens[t], hidden->data() + t * h);
  }
  return Status::Ok();
}

Status Stage::Forward(std::span<float> hidden, int64_t first_pos, KvCache& cache,
                      ForwardScratch& s) const {
  const BatchItem item{hidden, first_pos, &cache};
  LOCKSTEP_RETURN_IF_ERROR(Prepare(std::span<const BatchItem>(&item, 1), s));
  const size_t n = s.rows.size();
  for (int l = spec().lo; l < spec().hi; ++l) {
    Layer(l, hidden.data(), n, s);
    if (s.observer_ != nullptr) s.observer_->AfterLayer(l, hidden.first(n * this->hidden()));
  }
  return Status::Ok();
}

Status Stage::Step(std::span<float> hidden, int64_t first_pos, KvCache& cache, ForwardScratch& s,
                   std::span<float> logits) const {
  if (hidden.size() < this->hidden()) return InvalidError("a step without rows");
  LOCKSTEP_RETURN_IF_ERROR(Forward(hidden, first_pos, cache, s));
  if (spec().last) Logits(hidden.last(this->hidden()), logits, s);
  return Status::Ok();
}

Status Stage::ForwardBatch(std::span<const BatchItem> items, ForwardScratch& s) const {
  if (items.size() == 1) return Forward(items[0].hidden, items[0].first_pos, *items[0].cache, s);
  LOCKSTEP_RETURN_IF_ERROR(Prepare(items, s));
  const size_t n = s.rows.size(), h = hidden();
  FitScratch(s.batch, n * h);
  size_t off = 0;
  for (const BatchItem& it : items) {  // gather the sessions' rows
    std::copy(it.hidden.begin(), it.hidden.end(), s.batch.begin() + static_cast<ptrdiff_t>(off));
    off += it.hidden.size();
  }
  for (int l = spec().lo; l < spec().hi; ++l) Layer(l, s.batch.data(), n, s);
  off = 0;
  for (const BatchItem& it : items) {
    std::copy_n(s.batch.begin() + static_cast<ptrdiff_t>(off), it.hidden.size(), it.hidden.begin());
    off += it.hidden.size();
  }
  return Status::Ok();
}

// Validates every item, then appends each one's positions to its cache and
// records, per row, its cache entry and RoPE angles (§7.3, once per step).
Status Stage::Prepare(std::span<const BatchItem> items, ForwardScratch& s) const {
  const size_t h = hidden();
  for (const BatchItem& it : items) {
    if (it.hidden.size() % h != 0) return InvalidError("hidden state is not a whole number of rows");
    const auto pos = it.cache->positions();
    if (!pos.empty() && it.first_pos <= pos.back()) {
      return InvalidError("position " + std::to_string(it.first_pos) +
                          " does not follow the cache's last position " + std::to_string(pos.back()));
    }
    const int64_t n = static_cast<int64_t>(it.hidden.size() / h);
    if (it.first_pos < 0 || it.first_pos + n > (int64_t{1} << 24)) {
      return InvalidError("position " + std::to_string(it.first_pos) + " is out of range");
    }
  }
  s.rows.clear();
  size_t max_keys = 0;
  for (const BatchItem& it : items) {
    const size_t n = it.hidden.size() / h;
    const size_t first = it.cache->Append(n, it.first_pos);
    for (size_t t = 0; t < n; ++t) s.rows.push_back({it.cache, first + t, it.first_pos + static_cast<int64_t>(t)});
    max_keys = std::max(max_keys, it.cache->size());
  }
  Reserve(s, s.rows.size(), max_keys);
  const size_t half = inv_freq_.size();
  for (size_t i = 0; i < s.rows.size(); ++i) {
    float* c = s.rope.data() + i * 2 * half;
    ops::RopeAngles(inv_freq_, s.rows[i].pos, std::span<float>(c, half),
                    std::span<float>(c + half, half));
  }
  return Status::Ok();
}

// y = W x for every job, n tokens each, every row one sequential dot
// (§5.2), in work items of kUnitPanels panels: the jobs' items in one
// contiguous run per thread (ops::ForEachInRuns), one row or several, so
// a thread's weight stream runs on from panel to panel and the prefetch
// that reaches past the panel it is on fetches the thread's own next
// panel; with panels claimed one by one from a shared counter the
// threads alternated panels and each one started cold (`ops_bench
// --benchmark_filter=MatmulStream`, 8 rows: 14.9-16.2 ms per model-sized
// stream one panel per claim, 13.7 ms in runs).
void Stage::MatMul(std::initializer_list<MatJob> jobs, size_t n) const {
  size_t total = 0;
  for (const MatJob& j : jobs) total += Units(*j.w);
  auto unit = [&](size_t u) {
    for (const MatJob& j : jobs) {
      if (u < Units(*j.w)) {
        return kernels_.matmul_packed(*j.w, UnitBegin(u), UnitEnd(*j.w, u), j.x, n, j.y, j.w->rows());
      }
      u -= Units(*j.w);
    }
  };
  ForEachUnit(pool_, total, unit);
}

// One transformer layer over n positions (§8-§10).
void Stage::Layer(int layer, float* hidden, size_t n, ForwardScratch& s) const {
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer - spec().lo)];
  NormRows(hidden, nullptr, w.input_norm, n, s);  // §8 input_layernorm
  Attention(layer, w, n, s);                      // §9.1-9.4, o_proj into s.attn
  NormRows(hidden, s.attn.data(), w.post_norm, n, s);  // §9.5 residual, §8 post_attention_layernorm
  if (w.experts.empty()) {
    Mlp(w, hidden, n, s);  // §10
  } else {
    Moe(w, hidden, n, s);  // E4
  }
}

// Per row (rows split across the pool, each computed whole by one thread):
// hidden += residual when there is one, then s.normed = RmsNorm(hidden).
// One job where a residual added on the caller and a norm on the pool were
// two: the rows' adds no longer wait for one thread.
void Stage::NormRows(float* hidden, const float* residual, const std::vector<float>& weight,
                     size_t n, ForwardScratch& s) const {
  const size_t h = this->hidden();
  ForEachRow(pool_, n, [&](size_t t) {
    if (residual != nullptr) ops::AddInPlace(hidden + t * h, residual + t * h, h);
    ops::RmsNorm(hidden + t * h, weight.data(), h, config_.rms_norm_eps, s.normed.data() + t * h);
  });
}

// hidden += residual, rows split across the pool (§9.5, §10 residuals).
void Stage::AddRows(float* hidden, const float* residual, size_t n) const {
  const size_t h = this->hidden();
  ForEachRow(pool_, n, [&](size_t t) { ops::AddInPlace(hidden + t * h, residual + t * h, h); });
}

void Stage::Attention(int layer, const LayerWeights& w, size_t n, ForwardScratch& s) const {
  const int hd = config_.head_dim;
  const size_t half = inv_freq_.size();
  const size_t qw = w.q_proj.rows, kvw = w.k_proj.rows;
  MatMul({{&w.q_proj.packed, s.normed.data(), s.q.data()},  // §9.1
          {&w.k_proj.packed, s.normed.data(), s.k.data()},
          {&w.v_proj.packed, s.normed.data(), s.v.data()}},
         n);
  AddBias(w.q_bias, s.q.data(), n);
  AddBias(w.k_bias, s.k.data(), n);
  AddBias(w.v_bias, s.v.data(), n);
  ForEachRow(pool_, n, [&](size_t i) {  // §7.4: q in place; K (raw and rotated) and V to the cache
    const ForwardScratch::Row& r = s.rows[i];
    std::span<const float> cos_v(s.rope.data() + i * 2 * half, half);
    std::span<const float> sin_v(s.rope.data() + i * 2 * half + half, half);
    float* k = s.k.data() + i * kvw;
    if (!w.q_norm.empty()) {  // E3, before RoPE: the cache's raw K is the normalised K
      HeadNorms(s.q.data() + i * qw, qw, w.q_norm, config_.rms_norm_eps);
      HeadNorms(k, kvw, w.k_norm, config_.rms_norm_eps);
    }
    std::memcpy(r.cache->kraw_row(layer, r.entry), k, kvw * sizeof(float));
    r.cache->SetV(layer, r.entry, s.v.data() + i * kvw);
    ops::RotateHalf(std::span<float>(s.q.data() + i * qw, qw), hd, cos_v, sin_v);
    ops::RotateHalf(std::span<float>(k, kvw), hd, cos_v, sin_v);
    r.cache->SetK(layer, r.entry, k);
  });
  AttendAll(layer, n, s);
  MatMul({{&w.o_proj.packed, s.mixed.data(), s.attn.data()}}, n);  // §9.5
}

// §9.2-9.4 for every (row, query head). A row's keys are its cache's
// entries up to its own (earlier rows of the same call were written
// above), windowed per layer; the `group` query heads of a kv head
// (GQA: kv_head = qh / group) share every load of its K and V.
// Few rows (decode) cannot keep the pool busy with one item per
// (row, kv head), so their keys and head dims are split instead.
void Stage::AttendAll(int layer, size_t n, ForwardScratch& s) const {
  if (n * static_cast<size_t>(config_.num_kv_heads) < 2 * threads()) {
    AttendSplit(layer, n, s);
  } else {
    AttendRows(layer, n, s);
  }
}

// One item per (row, kv head): scores, softmax and mix in the thread's
// own `group` rows of s.scores.
void Stage::AttendRows(int layer, size_t n, ForwardScratch& s) const {
  const size_t hd = static_cast<size_t>(config_.head_dim), T = ops::kKvTile;
  const size_t heads = static_cast<size_t>(config_.num_heads);
  const size_t kvh = static_cast<size_t>(config_.num_kv_heads), group = heads / kvh;
  const size_t ss = s.key_stride;
  ops::ForEachInRuns(pool_, n * kvh, [&](size_t item, size_t thread) {
    float* p = s.scores.data() + thread * group * ss;
    const size_t i = item / kvh, h = item % kvh;
    const ForwardScratch::Row& r = s.rows[i];
    const size_t end = r.entry + 1, lo = r.cache->FirstVisible(layer, r.pos, end);
    const size_t at = i * heads * hd + h * group * hd;  // the group's q and output
    kernels_.attend_scores(s.q.data() + at, group, r.cache->k_tiles(layer, h), lo / T,
                           (end + T - 1) / T, hd, attn_scale_, p, ss);
    kernels_.softmax_rows(p + lo, end - lo, group, ss);
    kernels_.attend_mix(p, group, ss, r.cache->v_rows(layer, h), lo, end, hd, 0, hd,
                        s.mixed.data() + at);
  });
}

// n * kv_heads < 2 * threads: three passes over s.scores rows [n][heads]
// — scores by chunks of K tiles, softmax by group, mix by blocks of head
// dims. Every value is still computed whole by one thread.
void Stage::AttendSplit(int layer, size_t n, ForwardScratch& s) const {
  constexpr size_t kChunkTiles = 8, kMixDims = 32;
  const size_t hd = static_cast<size_t>(config_.head_dim), T = ops::kKvTile;
  const size_t heads = static_cast<size_t>(config_.num_heads);
  const size_t kvh = static_cast<size_t>(config_.num_kv_heads), group = heads / kvh;
  const size_t ss = s.key_stride;
  auto visible = [&](size_t i, size_t* lo, size_t* end) {
    const ForwardScratch::Row& r = s.rows[i];
    *end = r.entry + 1;
    *lo = r.cache->FirstVisible(layer, r.pos, *end);
  };
  size_t last = 0;  // the longest row's last entry
  for (size_t i = 0; i < n; ++i) last = std::max(last, s.rows[i].entry);
  const size_t chunks = (last / T + kChunkTiles) / kChunkTiles;
  // In runs: a thread's K prefetch reaches into the next chunk, its own.
  ops::ForEachInRuns(pool_, n * kvh * chunks, [&](size_t item) {  // §9.2
    const size_t i = item / (kvh * chunks), h = item / chunks % kvh, c = item % chunks;
    size_t lo, end;
    visible(i, &lo, &end);
    const size_t t0 = std::max(lo / T, c * kChunkTiles);
    const size_t t1 = std::min((end + T - 1) / T, (c + 1) * kChunkTiles);
    if (t0 >= t1) return;
    const size_t at = i * heads + h * group;
    kernels_.attend_scores(s.q.data() + at * hd, group, s.rows[i].cache->k_tiles(layer, h), t0,
                           t1, hd, attn_scale_, s.scores.data() + at * ss, ss);
  });
  ops::ForEachChunk(pool_, n * kvh, 1, [&](size_t b, size_t e, size_t) {  // §9.3
    for (size_t item = b; item < e; ++item) {
      size_t lo, end;
      visible(item / kvh, &lo, &end);
      kernels_.softmax_rows(s.scores.data() + item * group * ss + lo, end - lo, group, ss);
    }
  });
  const size_t blocks = (hd + kMixDims - 1) / kMixDims;
  ops::ForEachChunk(pool_, n * kvh * blocks, 1, [&](size_t b, size_t e, size_t) {  // §9.4
    for (size_t item = b; item < e; ++item) {
      const size_t i = item / (kvh * blocks), h = item / blocks % kvh, d0 = item % blocks * kMixDims;
      size_t lo, end;
      visible(i, &lo, &end);
      const size_t at = i * heads + h * group;
      kernels_.attend_mix(s.scores.data() + at * ss, group, ss, s.rows[i].cache->v_rows(layer, h),
                          lo, end, hd, d0, std::min(d0 + kMixDims, hd), s.mixed.data() + at * hd);
    }
  });
}

// §10 over n rows whose post_attention_layernorm output is in s.normed.
void Stage::Mlp(const LayerWeights& w, float* hidden, size_t n, ForwardScratch& s) const {
  const size_t inter = w.gate_proj.rows;
  // gate and up for work item u's panels, then §10's silu(gate)*up on their
  // rows; items as MatMul's.
  const ops::PackedMatrix& g = w.gate_proj.packed;
  ForEachUnit(pool_, Units(g), [&](size_t u) {
    const size_t p0 = UnitBegin(u), p1 = UnitEnd(g, u);
    kernels_.matmul_packed(g, p0, p1, s.normed.data(), n, s.gate.data(), inter);
    kernels_.matmul_packed(w.up_proj.packed, p0, p1, s.normed.data(), n, s.up.data(), inter);
    const size_t r0 = p0 * ops::kPanelRows, r1 = std::min(p1 * ops::kPanelRows, inter);
    for (size_t t = 0; t < n; ++t) {
      float* gt = s.gate.data() + t * inter;
      kernels_.silu_mul(gt + r0, s.up.data() + t * inter + r0, r1 - r0, gt + r0);
    }
  });
  MatMul({{&w.down_proj.packed, s.gate.data(), s.attn.data()}}, n);
  AddRows(hidden, s.attn.data(), n);  // §10 residual
}

void Stage::Logits(std::span<const float> row, std::span<float> logits, ForwardScratch& s) const {
  LogitsBatch(row.first(hidden()), logits, s);
}

void Stage::LogitsBatch(std::span<const float> rows, std::span<float> logits,
                        ForwardScratch& s) const {
  const size_t h = hidden(), n = rows.size() / h;
  FitScratch(s.normed, n * h);
  ForEachRow(pool_, n, [&](size_t t) {  // §11.1
    ops::RmsNorm(rows.data() + t * h, weights_.final_norm.data(), h, config_.rms_norm_eps,
                 s.normed.data() + t * h);
  });
  MatMul({{&weights_.head().packed, s.normed.data(), logits.data()}}, n);
}

}  // namespace lockstep
