#include "worker/row_step_host.h"

#include <algorithm>

#include "engine/decode.h"
#include "engine/row_passes.h"
#include "base/populate.h"
#include "engine/row_step.h"
#include "engine/witness.h"

namespace lockstep {

LayerObserver* RowStepHost::Start(size_t rows, size_t step_rows, size_t layers, bool traced,
                                  std::span<const Digest> earlier) {
  step_rows_ = step_rows;
  traced_ = traced;
  digests_.clear();
  if (!traced) return nullptr;
  if (layers_ != layers) {
    trace_ = RowStepTrace(layers);
    layers_ = layers;
  }
  earlier_.assign(earlier.begin(), earlier.end());
  trace_.Start();
  trace_.SetChunk(rows, rows - step_rows);
  return &trace_;
}

const std::vector<Digest>& RowStepHost::digests() {
  if (!traced_ || !digests_.empty()) return digests_;
  const size_t k = step_rows_ == 0 ? 0 : earlier_.size() / step_rows_;
  const auto& done = trace_.done();
  for (size_t r = 0; r < step_rows_ && r < done.size(); ++r) {
    digests_.insert(digests_.end(), earlier_.begin() + static_cast<std::ptrdiff_t>(r * k),
                    earlier_.begin() + static_cast<std::ptrdiff_t>((r + 1) * k));
    digests_.insert(digests_.end(), done[r].begin(), done[r].end());
  }
  return digests_;
}

Result<wire::StepResult> RowStepHost::Choose(const Stage& stage, std::span<const float> hidden,
                                             size_t step_rows, const SamplingParams& sampling,
                                             const wire::ChainHandoff& handoff,
                                             ForwardScratch& scratch) {
  const size_t h = stage.hidden(), v = stage.vocab(), n = hidden.size() / h;
  LOCKSTEP_ASSIGN_OR_RETURN(WitnessChain chain, WitnessChain::Resume(handoff.chain_state));
  const StepContext ctx{handoff.decode_step, sampling, &chain, &sampling_, nullptr};
  outcomes_.clear();
  states_.clear();
  for (size_t at = 0; at < step_rows; at = PassEnd(at, step_rows)) {
    const size_t m = PassEnd(at, step_rows) - at;
    ResizePopulated(logits_, m * v);
    stage.LogitsBatch(hidden.subspan((n - step_rows + at) * h, m * h), logits_, scratch);
    // No tokens to compare: every row is chosen, the coordinator accepts.
    ChooseRows(logits_, m, {}, ctx, handoff.decode_step + static_cast<uint32_t>(at), &outcomes_,
               stage.pool(), &states_);
  }
  wire::StepResult r;
  r.token = outcomes_[0].token;
  r.logits_sha256 = outcomes_[0].logits_sha256;
  r.chain_state = states_[0];
  for (size_t i = 1; i < outcomes_.size(); ++i) {
    r.later_rows.push_back({outcomes_[i].token, outcomes_[i].logits_sha256, states_[i]});
  }
  r.layer_digests = digests();
  return r;
}

}  // namespace lockstep
