// Stage::Moe and E4's routing (moe.h).
#include "engine/moe.h"

#include <algorithm>
#include <cstring>

#include "engine/matmul_units.h"
#include "engine/stage.h"

namespace lockstep {

void ChooseExperts(const float* p, size_t experts, size_t k, bool norm_topk_prob, uint8_t* taken,
                   uint32_t* chosen, float* weight) {
  std::fill(taken, taken + experts, uint8_t{0});
  for (size_t j = 0; j < k; ++j) {  // top-k: strict >, ties to the lower index
    size_t best = experts;
    for (size_t e = 0; e < experts; ++e) {
      if (taken[e] == 0 && (best == experts || p[e] > p[best])) best = e;
    }
    taken[best] = 1;
    chosen[j] = static_cast<uint32_t>(best);
  }
  std::sort(chosen, chosen + k);
  if (!norm_topk_prob) {
    for (size_t j = 0; j < k; ++j) weight[j] = p[chosen[j]];
    return;
  }
  float sum = 0.0f;  // ascending expert index
  for (size_t j = 0; j < k; ++j) sum = sum + p[chosen[j]];
  for (size_t j = 0; j < k; ++j) weight[j] = p[chosen[j]] / sum;
}

void MoeScratch::Reserve(size_t n, const ModelConfig& c) {
  if (!c.is_moe()) return;
  const size_t experts = static_cast<size_t>(c.moe.num_experts);
  const size_t k = static_cast<size_t>(c.moe.experts_per_tok);
  const size_t h = static_cast<size_t>(c.hidden_size);
  const size_t inter = static_cast<size_t>(c.moe.intermediate_size);
  FitScratch(probs, n * experts);
  FitScratch(taken, n * experts);
  FitScratch(chosen, n * k);
  FitScratch(weight, n * k);
  FitScratch(slot, n * k);
  FitScratch(first, experts + 1);
  FitScratch(next, experts);
  active.reserve(experts);
  unit_end.reserve(experts);
  FitScratch(x, n * k * h);
  FitScratch(gate, n * k * inter);
  FitScratch(up, n * k * inter);
  FitScratch(out, n * k * h);
  FitScratch(y, n * h);
}

namespace {

// Counting sort of the n rows' choices by expert (rows ascending within
// an expert): first, slot and the ascending list of active experts.
void GroupByExpert(MoeScratch& m, size_t n, size_t experts, size_t k) {
  std::fill(m.first.begin(), m.first.begin() + static_cast<ptrdiff_t>(experts + 1), 0u);
  for (size_t i = 0; i < n * k; ++i) ++m.first[m.chosen[i] + 1];
  m.active.clear();
  for (size_t e = 0; e < experts; ++e) {
    if (m.first[e + 1] > 0) m.active.push_back(static_cast<uint32_t>(e));
    m.first[e + 1] += m.first[e];
    m.next[e] = m.first[e];
  }
  for (size_t i = 0; i < n * k; ++i) m.slot[i] = m.next[m.chosen[i]]++;
}

// Work items of one pass over the active experts' `which` matrix:
// unit_end[a] = items of experts active[0..a]. Returns their total.
size_t CountUnits(MoeScratch& m, const LayerWeights& w, WeightMatrix ExpertWeights::*which) {
  m.unit_end.clear();
  size_t total = 0;
  for (uint32_t e : m.active) {
    total += Units((w.experts[e].*which).packed);
    m.unit_end.push_back(total);
  }
  return total;
}

// The active expert of work item u, and u's index within that expert.
size_t ActiveOf(const MoeScratch& m, size_t* u) {
  const size_t a = static_cast<size_t>(
      std::upper_bound(m.unit_end.begin(), m.unit_end.end(), *u) - m.unit_end.begin());
  if (a > 0) *u -= m.unit_end[a - 1];
  return a;
}

// Every active expert's gate and up over its rows, then silu(gate) * up
// (§10), in one pass of work items; then its down_proj likewise, into
// m.out. Each work item is a run of one expert's panels for all its rows.
void RunExperts(const ops::Kernels& kernels, ops::ThreadPool* pool, const LayerWeights& w,
                size_t h, size_t inter, MoeScratch& m) {
  ForEachUnit(pool, CountUnits(m, w, &ExpertWeights::gate_proj), [&](size_t u) {
    const size_t e = m.active[ActiveOf(m, &u)], r0 = m.first[e], rows = m.first[e + 1] - r0;
    const ops::PackedMatrix& g = w.experts[e].gate_proj.packed;
    const size_t p0 = UnitBegin(u), p1 = UnitEnd(g, u);
    float* gate = m.gate.data() + r0 * inter;
    float* up = m.up.data() + r0 * inter;
    kernels.matmul_packed(g, p0, p1, m.x.data() + r0 * h, rows, gate, inter);
    kernels.matmul_packed(w.experts[e].up_proj.packed, p0, p1, m.x.data() + r0 * h, rows, up,
                          inter);
    const size_t i0 = p0 * ops::kPanelRows, i1 = std::min(p1 * ops::kPanelRows, inter);
    for (size_t r = 0; r < rows; ++r) {
      kernels.silu_mul(gate + r * inter + i0, up + r * inter + i0, i1 - i0, gate + r * inter + i0);
    }
  });
  ForEachUnit(pool, CountUnits(m, w, &ExpertWeights::down_proj), [&](size_t u) {
    const size_t e = m.active[ActiveOf(m, &u)], r0 = m.first[e], rows = m.first[e + 1] - r0;
    const ops::PackedMatrix& d = w.experts[e].down_proj.packed;
    kernels.matmul_packed(d, UnitBegin(u), UnitEnd(d, u), m.gate.data() + r0 * inter, rows,
                          m.out.data() + r0 * h, h);
  });
}

// Row t's y = +0 + w * out over its experts in ascending index (a separate
// mul and add each), then the §5.4 residual into hidden.
void Combine(ops::ThreadPool* pool, size_t n, size_t k, size_t h, MoeScratch& m, float* hidden) {
  ForEachRow(pool, n, [&](size_t t) {
    float* y = m.y.data() + t * h;
    std::fill(y, y + h, 0.0f);
    for (size_t j = 0; j < k; ++j) {
      const float wj = m.weight[t * k + j];
      const float* o = m.out.data() + m.slot[t * k + j] * h;
      for (size_t i = 0; i < h; ++i) {
        const float part = wj * o[i];
        y[i] = y[i] + part;
      }
    }
    ops::AddInPlace(hidden + t * h, y, h);
  });
}

}  // namespace

// E4 over n rows whose post_attention_layernorm output is in s.normed.
void Stage::Moe(const LayerWeights& w, float* hidden, size_t n, ForwardScratch& s) const {
  const MoeConfig& c = config_.moe;
  const size_t experts = static_cast<size_t>(c.num_experts);
  const size_t k = static_cast<size_t>(c.experts_per_tok);
  const size_t h = this->hidden();
  MoeScratch& m = s.moe;
  MatMul({{&w.router.packed, s.normed.data(), m.probs.data()}}, n);  // router logits, §5.2
  ForEachRow(pool_, n, [&](size_t t) {
    float* p = m.probs.data() + t * experts;
    kernels_.softmax_rows(p, experts, 1, experts);  // §9.3
    ChooseExperts(p, experts, k, c.norm_topk_prob, m.taken.data() + t * experts,
                  m.chosen.data() + t * k, m.weight.data() + t * k);
  });
  GroupByExpert(m, n, experts, k);
  ForEachRow(pool_, n, [&](size_t t) {  // each row to its experts' groups
    for (size_t j = 0; j < k; ++j) {
      std::memcpy(m.x.data() + m.slot[t * k + j] * h, s.normed.data() + t * h, h * sizeof(float));
    }
  });
  RunExperts(kernels_, pool_, w, h, static_cast<size_t>(c.intermediate_size), m);
  Combine(pool_, n, k, h, m, hidden);
}

}  // namespace lockstep
