#include "engine/local_backend.h"

#include <algorithm>
#include <cassert>

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
  scratch_.set_observer(&trace_);
}

Status LocalBackend::Evict(uint32_t from, uint32_t count) { return cache_.Evict(from, count); }

Status LocalBackend::SetWindow(int window) {
  for (int l = cache_.lo(); l < cache_.hi(); ++l) LOCKSTEP_RETURN_IF_ERROR(cache_.SetWindow(l, window));
  return Status::Ok();
}

}  // namespace lockstep
