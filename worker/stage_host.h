// StageHost: the compute side of a worker — the assigned Stage, and one
// KvCache per session for the layers [lo, hi) it serves. It turns each
// incoming protocol message into the messages to send (Outgoing) and never
// touches a socket, so the worker's I/O thread stays free for heartbeats
// while a long prefill runs. It is a dispatcher over parts with their own
// tests: loading an Assign (stage_assignment.h), the sessions and the
// rules a step must pass before any work — positions, relays, KV budget
// (session_table.h over step_rules.h), turning a computed step into
// messages (step_emitter.h) and multi-row steps (row_step_host.h).
//
// Per-session order: the coordinator sends every message of a session to
// the first stage; each stage applies it and forwards it to the next over
// one FIFO link, so SessionOpen/Evict/Fork/Release and hidden frames reach
// every stage in the order the coordinator issued them.
//
// The last stage answers a step that carries a chain handoff with a
// StepResult: it chooses the token from its logits with the session's
// sampling (fixed at SessionOpen) and folds logits || token into the
// handed-over chain (ChooseAndWitness); other steps get their Logits.
//
// Relays (ChainHandoff.relay = R): the last stage also sends the chosen
// token to the first stage as the session's next step, relayed with R - 1
// to follow, before its StepResult. The first stage accepts a relayed step
// only as the one its session expects (the request number after the last
// and exactly one fewer to follow), refuses a coordinator's step, Evict or
// Fork of the session until the relay is over, and drops relayed steps of
// sessions released or failed meanwhile without a word (they were in
// flight when the coordinator let go).
//
// A multi-row step (TokenInput.stepRows) runs its rows as one pass on every
// stage; the last stage answers it with every step row's outcome
// (RowStepHost, worker/row_step_host.h).
//
// A traced session (SessionOpen.trace) is never batched: each stage hashes
// the hidden state after each of its layers and appends the digests to
// those of the stages before it, on its hidden frame or, on the last stage,
// on its StepResult/Logits (docs/receipts.md, trace mode).
//
// Errors on a session become an ErrorReport to the coordinator (naming the
// worker, stage and layers) and mark the session failed; the host itself
// keeps serving. Thread-compatible: one compute thread owns a StageHost,
// which must have pinned the FP environment (§1.3).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/kv_cache.h"
#include "engine/layer_trace.h"
#include "engine/model_loader.h"
#include "engine/ops/kernels.h"
#include "engine/sampling.h"
#include "engine/stage.h"
#include "engine/step_outcome.h"
#include "wire/frame_pool.h"
#include "wire/messages.h"
#include "worker/row_step_host.h"
#include "worker/session_table.h"
#include "worker/step_emitter.h"

namespace lockstep {

class StageHost {
 public:
  // compute: kernels, threads and weight format of every stage it loads.
  StageHost(std::string worker_name, ComputeOptions compute);

  // Opens `dir` instead of the folder an Assign names ("" = as assigned).
  void set_model_dir_override(std::string dir) { model_dir_override_ = std::move(dir); }

  // Test hook: sees every hidden frame after it decoded and verified.
  void set_observe_hidden_for_testing(std::function<void(const wire::HiddenFrame&)> f) {
    observe_hidden_ = std::move(f);
  }

  // Applies one message (Assign, SessionOpen, TokenInput, HiddenFrame,
  // Evict, Fork, Release); appends what to send, in order, to *out.
  void Handle(const wire::Message& message, std::vector<Outgoing>* out);

  // True for one decode step: a single-token TokenInput on the first stage
  // or a single-row HiddenFrame on a later one (what HandleDecodeBatch takes).
  bool IsDecodeStep(const wire::Message& message) const;
  // The session a message is about, and the step of a TokenInput or
  // HiddenFrame (session_table.h).
  static uint64_t SessionOf(const wire::Message& message, bool* has) {
    return SessionOfMessage(message, has);
  }
  static uint32_t StepOf(const wire::Message& message) { return StepOfMessage(message); }

  // Applies decode steps of DISTINCT sessions (IsDecodeStep each, at most
  // max_batch()) as one ForwardBatch/LogitsBatch pass; appends, per session
  // in the given order, exactly what Handle would have appended for it.
  void HandleDecodeBatch(std::span<const wire::Message* const> messages,
                         std::vector<Outgoing>* out);
  // Rows per batch; the batch buffers are sized for this when assigned.
  void set_max_batch(size_t n) { max_batch_ = n < 1 ? 1 : n; }
  size_t max_batch() const { return max_batch_; }
  // Passes that ran more than one session's row, and the rows they ran.
  uint64_t batched_steps() const { return batched_steps_; }
  uint64_t batched_rows() const { return batched_rows_; }
  // Nanoseconds spent on steps (layers, logits, encoding their frames)
  // since this host started.
  uint64_t compute_nanos() const { return compute_nanos_; }

  // Marks a session failed and reports `status` for it (e.g. a frame for
  // it arrived corrupt).
  void FailSession(uint64_t session_id, const Status& status, std::vector<Outgoing>* out);

  // The KV memory budget (Limits::kv_bytes_per_worker): a step or fork
  // whose entries would take the sessions' KV bytes (entries held x
  // kv_entry_bytes(), capacity not counted) past it is refused with
  // Overloaded naming the limit, before any work. A step refused so on the
  // first stage leaves its session as it was (it may be retried); on a later
  // stage the earlier ones have already run it, so the session fails.
  void set_kv_budget(uint64_t bytes) { sessions_.set_kv_budget(bytes); }
  // The weight memory budget (Limits::weight_bytes_per_worker, 0: none):
  // an Assign whose stage's tensors take more bytes (as the checkpoint
  // stores them, stage_bytes.h) is refused as Invalid naming the limit and
  // this worker, before anything is loaded.
  void set_weight_budget(uint64_t bytes) { weight_budget_ = bytes; }
  // Bytes one cache entry takes on this stage's layers (KvBytesPerPosition,
  // engine/kv_bytes.h); 0 before an Assign.
  uint64_t kv_entry_bytes() const;
  // Entries held by every session together.
  uint64_t kv_entries() const { return sessions_.entries(); }

  // Per-step frames (hidden frames, step results) are marshalled into
  // frames taken from `pool`, which whoever sends them gives back, so that a
  // decode step allocates nothing. `pool` must outlive the host; null: none.
  void set_frame_pool(wire::FramePool* pool) { emitter_.set_frame_pool(pool); }

  // Frees every session (their coordinator is gone); the stage stays loaded.
  void DropSessions() { sessions_.Clear(); }

  // "worker NAME stage K layers [lo,hi)" (or "worker NAME (unassigned)").
  std::string Who() const;
  // The assigned stage's index in the pipeline (0 before an Assign).
  uint32_t stage_index() const { return assign_.worker_index; }
  size_t session_count() const { return sessions_.size(); }

 private:
  // An Assign of the stage already loaded only re-wires it: the next hop
  // and keys change, the stage and its sessions stay; it is answered Hello
  // and AssignAck like any Assign (stage_assignment.h, SameStage). Any
  // other Assign loads afresh and drops every session.
  void OnAssign(const wire::Assign& m, std::vector<Outgoing>* out);
  void Rewire(const wire::Assign& m, std::vector<Outgoing>* out);
  Status LoadAssignment(const wire::Assign& m, std::vector<Outgoing>* out);
  Status OnOpen(const wire::SessionOpen& m);
  Status OnFork(const wire::Fork& m);
  Status OnTokens(const wire::TokenInput& m, std::vector<Outgoing>* out);
  Status OnHidden(const wire::HiddenFrame& m, std::vector<Outgoing>* out);

  // Validate a TokenInput/HiddenFrame by the step rules (session_table.h)
  // and put its rows in hidden_.
  Status AcceptTokens(const wire::TokenInput& m, StepInput* in);
  Status AcceptHidden(const wire::HiddenFrame& m, StepInput* in);

  // Runs the stage's layers over hidden_ and emits the hidden frame or logits.
  Status ForwardAndEmit(const StepInput& in, std::vector<Outgoing>* out);
  // ForwardAndEmit of a multi-row step: its hidden frame, or on the last
  // stage its StepResult of every step row.
  Status ForwardRows(const StepInput& in, std::vector<Outgoing>* out);
  // Whether HandleDecodeBatch may run `messages` as one pass.
  bool CanBatch(std::span<const wire::Message* const> messages) const;
  void AcceptBatch(std::span<const wire::Message* const> messages, std::vector<Outgoing>* out);
  // The first stage's refusal of a coordinator's step for being Overloaded
  // leaves the session usable: only reported, the session not failed.
  void Refuse(const wire::Message& m, const Status& st, std::vector<Outgoing>* out);
  void Forward(const wire::Message& message, std::vector<Outgoing>* out) const;
  void Report(const Status& st, bool has_session, uint64_t session_id,
              std::vector<Outgoing>* out) const;

  std::string name_;
  std::string model_dir_override_;
  ComputeOptions compute_;
  std::function<void(const wire::HiddenFrame&)> observe_hidden_;
  wire::Assign assign_;                  // current assignment
  wire::Hello hello_;                    // what it answered to it
  LoadedStage stage_;                    // empty until an Assign loaded
  SessionTable sessions_;
  StepEmitter emitter_;
  std::vector<float> hidden_;            // [n][hidden] scratch residual stream
  ForwardScratch scratch_;               // grows to the largest step, then reused
  LayerTrace trace_;                     // the current step's digests, earlier stages' first
  RowStepHost row_steps_;                // multi-row steps
  size_t max_batch_ = 16;
  std::vector<StepInput> batch_inputs_;  // [max_batch], HandleDecodeBatch
  std::vector<Stage::BatchItem> batch_items_;  // [max_batch]
  std::vector<float> batch_hidden_;      // [max_batch][hidden], sized when assigned
  std::vector<float> batch_logits_;      // [max_batch][vocab], last stage only
  uint64_t batched_steps_ = 0;
  uint64_t batched_rows_ = 0;
  uint64_t weight_budget_ = 0;  // 0: none
  uint64_t compute_nanos_ = 0;
};

}  // namespace lockstep
