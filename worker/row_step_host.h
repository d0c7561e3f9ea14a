// RowStepHost: a stage's part in a multi-row step (TokenInput.stepRows;
// docs/wire_protocol.md, "Multi-row steps"). Every stage runs the step's n
// rows as one pass over its layers, as it runs a prompt. A traced session's
// digests are taken per step row's segment (engine/row_step_trace.h: the
// rows since the step row before, up to and including its own), after the
// earlier stages' digests of the same segment, so each step row carries
// what a single step of it would. The last stage then computes the logits
// of the R step rows in passes (engine/row_passes.h), and chooses
// every row's token with ChooseRows (engine/row_step.h) as the steps
// handoff.decodeStep .. decodeStep+R-1, folding them into the handed-over
// chain in order; its StepResult reports all R outcomes, each with the
// chain state after it.
//
// The last stage does not decide which rows are kept: it never sees the
// tokens. The coordinator, which fed them, keeps the rows in order while
// each row's token equals the token fed after it (AcceptedRows) and evicts
// the rest from every stage's cache with an Evict sent down the pipeline
// before its next step (KV eviction of a tail span equals never having fed
// it). A rejected row costs its logits and hashes, never a bit.
// Thread-compatible: owned by the StageHost's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "engine/layer_trace.h"
#include "engine/row_step_trace.h"
#include "engine/sampling.h"
#include "engine/stage.h"
#include "engine/step_outcome.h"
#include "wire/messages.h"

namespace lockstep {

class RowStepHost {
 public:
  // Starts a step of `rows` rows whose last `step_rows` are step rows, on
  // a stage of `layers` layers. traced: `earlier` holds the earlier stages'
  // digests, the same number per step row ([step_rows][k]). Returns the
  // observer for the stage's Forward (null when untraced).
  LayerObserver* Start(size_t rows, size_t step_rows, size_t layers, bool traced,
                       std::span<const Digest> earlier);
  // After the Forward, traced: per step row, the earlier stages' digests
  // and then this stage's ([step_rows][k + layers]); empty when untraced.
  const std::vector<Digest>& digests();

  // Last stage, after the Forward over hidden ([n][hidden]): the outcomes
  // of its last `step_rows` rows as one StepResult (session and step left
  // 0 for the caller; layer digests when traced). Corrupt if the handoff's
  // chain state does not resume.
  Result<wire::StepResult> Choose(const Stage& stage, std::span<const float> hidden,
                                  size_t step_rows, const SamplingParams& sampling,
                                  const wire::ChainHandoff& handoff, ForwardScratch& scratch);

 private:
  RowStepTrace trace_;
  size_t layers_ = 0, step_rows_ = 0;
  bool traced_ = false;
  std::vector<Digest> earlier_;
  std::vector<Digest> digests_;
  std::vector<float> logits_;  // [<= kRowsPerPass][vocab]
  SamplingScratch sampling_;
  std::vector<StepOutcome> outcomes_;
  std::vector<Sha256State> states_;
};

}  // namespace lockstep
