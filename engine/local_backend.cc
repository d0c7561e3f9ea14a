#include "engine/local_backend.h"

#include <algorithm>
#include <cassert>
#include <string>

#include "base/populate.h"

namespace lockstep {

LocalBackend::LocalBackend(const Stage& stage, size_t reserve_positions)
    : stage_(stage),
      cache_(stage.NewCache(reserve_positions)),
      scratch_(stage.NewScratch(1, reserve_positions)) {
  assert(stage.spec().first && stage.spec().last);
  hidden_.reserve(stage.hidden());
}

LocalBackend::LocalBackend(const Stage& stage, KvCache cache, size_t reserve_positions)
    : stage_(stage),
      cache_(std::move(cache)),
      scratch_(stage.NewScratch(1, std::max(cache_.size(), reserve_positions))) {
  cache_.Reserve(reserve_positions);
  hidden_.reserve(stage.hidden());
}

Result<StepOutcome> LocalBackend::FeedAndChoose(std::span<const uint32_t> tokens,
                                                const StepContext& ctx) {
  LOCKSTEP_RETURN_IF_ERROR(Feed(tokens, ctx.logits));
  return ChooseAndWitness(*ctx.logits, ctx.sampling, ctx.step, ctx.chain, ctx.scratch,
                          stage_.pool());
}

Status LocalBackend::Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) {
  if (tokens.empty()) return InvalidError("no tokens to feed");
  trace_.Clear();
  LOCKSTEP_RETURN_IF_ERROR(stage_.Embed(tokens, &hidden_));
  logits->resize(stage_.vocab());
  return stage_.Step(hidden_, static_cast<int64_t>(cache_.size()), cache_, scratch_, *logits);
}

void LocalBackend::EnableTrace() {
  trace_ = LayerTrace(static_cast<size_t>(stage_.config().num_layers));
  row_trace_ = RowStepTrace(static_cast<size_t>(stage_.config().num_layers));
  tracing_ = true;
  scratch_.set_observer(&trace_);
}

Status LocalBackend::FeedRows(std::span<const uint32_t> tokens, uint32_t rows,
                              const StepContext& ctx, RowSteps* out) {
  LOCKSTEP_RETURN_IF_ERROR(CheckRows(tokens, rows));
  for (const uint32_t t : tokens) {  // before the first pass: a refused step changes nothing
    if (t >= stage_.vocab()) {
      return InvalidError("token id " + std::to_string(t) + " is outside the vocabulary (" +
                          std::to_string(stage_.vocab()) + " ids)");
    }
  }
  out->steps.clear();
  out->traces.clear();
  trace_.Clear();
  if (tracing_) {
    row_trace_.Start();
    scratch_.set_observer(&row_trace_);
  }
  const size_t n = tokens.size(), first = n - rows;
  Status st;
  bool ended = false;
  for (size_t at = 0; at < n && !ended && st.ok(); at = PassEnd(at, n)) {
    st = FeedPass(tokens, at, PassEnd(at, n), first, ctx, out, &ended);
  }
  if (tracing_) {
    scratch_.set_observer(&trace_);
    auto& done = row_trace_.done();
    done.resize(std::min(done.size(), out->steps.size()));
    out->traces = std::move(done);
  }
  return st;
}

Status LocalBackend::FeedPass(std::span<const uint32_t> tokens, size_t at, size_t end,
                              size_t first, const StepContext& ctx, RowSteps* out, bool* ended) {
  const size_t h = stage_.hidden(), vocab = stage_.vocab();
  const size_t lo = std::max(at, first);  // this pass's first step row (if lo < end)
  const size_t base = cache_.size() - at;  // the entry of tokens[0]
  LOCKSTEP_RETURN_IF_ERROR(stage_.Embed(tokens.subspan(at, end - at), &hidden_));
  if (tracing_) row_trace_.SetChunk(end - at, std::min(lo, end) - at);
  LOCKSTEP_RETURN_IF_ERROR(stage_.Forward(hidden_, static_cast<int64_t>(cache_.size()), cache_, scratch_));
  if (end <= first) return Status::Ok();
  const size_t m = end - lo;
  ResizePopulated(row_logits_, m * vocab);
  stage_.LogitsBatch(std::span<const float>(hidden_).subspan((lo - at) * h, m * h), row_logits_,
                     scratch_);
  const auto next = tokens.subspan(lo + 1, std::min(m, tokens.size() - lo - 1));
  const uint32_t step = ctx.step + static_cast<uint32_t>(lo - first);
  const RowsChosen chosen = ChooseRows(row_logits_, m, next, ctx, step, &out->steps, stage_.pool());
  *ended = chosen.ended;
  const size_t kept = lo + chosen.count;  // tokens [0, kept) stay in the cache
  if (kept < end) return cache_.Evict(base + kept, end - kept);
  return Status::Ok();
}

Status LocalBackend::Evict(uint32_t from, uint32_t count) { return cache_.Evict(from, count); }

Status LocalBackend::SetWindow(int window) {
  for (int l = cache_.lo(); l < cache_.hi(); ++l) LOCKSTEP_RETURN_IF_ERROR(cache_.SetWindow(l, window));
  return Status::Ok();
}

}  // namespace lockstep
