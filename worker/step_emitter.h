// StepEmitter: turns a step a stage has computed into the messages it
// sends (Outgoing, worker/stage_host.h), never touching a socket.
//   - A stage before the last sends its rows [n][hidden] on to the next
//     stage as a HiddenFrame resuming at its layer_hi, carrying the step's
//     handoff, no_output and step rows, and (traced session) the layer
//     digests so far.
//   - The last stage answers a step that carries a chain handoff with a
//     StepResult: the token chosen from its logits with the session's
//     sampling and logits || token folded into the handed-over chain
//     (ChooseAndWitness, engine/step_outcome.h). A step relaying R > 0
//     after it first sends the session's next step to the first stage
//     (To::kFirstStage): a TokenInput of the chosen token, relayed, at
//     the next position, with the chain after this step and R - 1 to
//     follow. A step without a handoff gets its Logits; a no_output step
//     gets nothing.
//   - A batch of rows (EmitOutcomes) chooses every row's token at once on
//     the stage's pool, then sends every relayed next step before any
//     StepResult (the next steps are awaited), each in row order.
// Per-step frames are marshalled into frames of the frame pool (when set),
// and the messages are reused from step to step, so a decode step
// allocates nothing. A handoff whose chain state does not resume is an
// error for the caller to fail the session with.
// Thread-compatible: owned by the StageHost's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "engine/ops/thread_pool.h"
#include "engine/sampling.h"
#include "engine/step_outcome.h"
#include "engine/witness.h"
#include "wire/frame_pool.h"
#include "wire/messages.h"
#include "worker/outgoing.h"
#include "worker/session_table.h"

namespace lockstep {

// A validated TokenInput or HiddenFrame whose rows a stage runs.
struct StepInput {
  StageSession* session = nullptr;
  uint64_t session_id = 0;
  uint32_t step = 0;
  uint32_t first_pos = 0;
  size_t n = 0;
  const std::optional<wire::ChainHandoff>* handoff = nullptr;  // the message's
  bool no_output = false;  // the last stage computes no logits and replies nothing
  uint32_t relay = 0;      // relayed steps to follow this one
  uint16_t step_rows = 0;  // a multi-row step's step rows (0: an ordinary step)
};

class StepEmitter {
 public:
  // Where the stage sits, set at each Assign: its index (timeline marks),
  // its layer_hi (where a hidden frame resumes), the model's hidden width,
  // and the pool the last stage chooses a batch's tokens on (may be null).
  void Configure(uint32_t stage_index, uint32_t layer_hi, size_t hidden, ops::ThreadPool* pool);
  // `pool` must outlive the emitter; null: frames are allocated.
  void set_frame_pool(wire::FramePool* pool) { frame_pool_ = pool; }

  // Stage before the last: `rows` [n][hidden] on to the next stage, with
  // `digests` when the session is traced.
  void EmitHidden(const StepInput& in, std::span<const float> rows,
                  std::span<const Digest> digests, std::vector<Outgoing>* out);
  // Last stage: the StepResult (after the relayed next step) or Logits of
  // one step, with `digests` when the session is traced; an error (nothing
  // appended) when the handoff's chain does not resume.
  Status EmitOutcome(const StepInput& in, std::span<const float> logits,
                     std::span<const Digest> digests, std::vector<Outgoing>* out);
  // Last stage: EmitOutcome for each of `rows` (untraced) with its logits
  // [rows][vocab]; a row whose chain does not resume is passed to `fail`
  // in its place in the order.
  void EmitOutcomes(std::span<const StepInput> rows, std::span<const float> logits,
                    const std::function<void(const StepInput&, const Status&)>& fail,
                    std::vector<Outgoing>* out);
  // Last stage: a multi-row step's StepResult `r` (RowStepHost), stamped
  // with the step's session and step.
  void EmitRowsResult(const StepInput& in, wire::StepResult r, std::vector<Outgoing>* out);

 private:
  void SendStepResult(const StepInput& in, const StepOutcome& o, const WitnessChain& chain,
                      std::span<const Digest> digests, std::vector<Outgoing>* out);
  // The session's next step, relayed to the first stage (in.relay > 0).
  void SendRelay(const StepInput& in, const StepOutcome& o, const WitnessChain& chain,
                 std::vector<Outgoing>* out);
  // A pooled frame to marshal a step's output into (empty without a pool).
  wire::Frame TakeFrame();
  // An Outgoing of step `step` of in's session to `to`, with a pooled frame.
  Outgoing& Push(Outgoing::To to, const StepInput& in, uint32_t step, std::vector<Outgoing>* out);

  uint32_t stage_index_ = 0;
  uint32_t layer_hi_ = 0;
  size_t hidden_ = 0;
  ops::ThreadPool* pool_ = nullptr;
  wire::FramePool* frame_pool_ = nullptr;
  SamplingScratch sampling_;          // EmitOutcome's
  wire::HiddenFrame out_hidden_;      // EmitHidden's frame, reused step to step
  wire::TokenInput out_relay_;        // SendRelay's message, reused step to step
  // EmitOutcomes': one per row.
  std::vector<SamplingScratch> row_sampling_;
  std::vector<std::optional<WitnessChain>> row_chains_;
  std::vector<StepOutcome> row_outcomes_;
  std::vector<StepChoice> row_choices_;
};

}  // namespace lockstep
