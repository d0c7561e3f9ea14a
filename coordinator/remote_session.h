// RemoteSession: a StepBackend on a cluster (a SessionLink: the
// Coordinator). Its Feed sends the tokens to the first stage and waits for
// the last stage's logits; its FeedAndChoose hands the witness chain along
// with the tokens and gets back the token, the logits' sha256 and the
// advanced chain (unless the cluster ships logits, when it chooses from
// the logits itself). It keeps its history (SessionHistory: every feed and
// eviction, 4 bytes per token fed) to rebuild itself after a recovery: it
// releases its id, reopens under a fresh one and replays the history, so
// every stage's cache is rebuilt bit-identically, then retries its step.
// Released on the workers when destroyed.
//
// Relayed steps: after ExpectChainedSteps(n), the next FeedAndChoose asks
// the pipeline to relay n steps after it: the last stage sends each chosen
// token straight back to the first stage, so a step costs no round trip
// through the coordinator, and the session's next n FeedAndChoose calls
// only collect their StepResults. A call that does not continue the chain
// (another token, Feed, Evict, Fork, FeedWithoutOutput) first collects the
// steps still relayed and evicts their positions, which leaves every
// stage's cache as if they had never run (KV eviction is exact).
//
// Multi-row steps (FeedRows, engine/row_step.h): the tokens go as one
// TokenInput whose last rows are steps (stepRows; at most
// kStepRowsPerRequest per request, a longer run in several), every stage
// runs them as one pass and the last stage reports every step row's
// outcome in one StepResult (worker/row_step_host.h). The session keeps
// the rows in order while each one's token equals the token fed after it
// (AcceptedRows), resumes the chain from the last kept row's state and
// evicts the rest on every stage (an Evict posted before anything else of
// the session, so its next step cannot overtake it). Every reply is
// checked: exactly the rows asked for, tokens in the vocabulary, a trace of
// every model layer per row when traced.
//
// Thread-compatible (one thread drives a session). The link must outlive
// the session.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/status.h"
#include "coordinator/session_history.h"
#include "coordinator/session_link.h"
#include "engine/decode.h"
#include "engine/sampling.h"
#include "wire/messages.h"

namespace lockstep {

class RemoteSession final : public StepBackend {
 public:
  // open: the SessionOpen already posted for it (its id, window and
  // sampling), kept to reopen the session after a recovery. epoch: the
  // link's epoch it was opened at.
  RemoteSession(SessionLink& link, const wire::SessionOpen& open, const SamplingParams& sampling,
                uint64_t epoch);
  ~RemoteSession() override;
  RemoteSession(const RemoteSession&) = delete;
  RemoteSession& operator=(const RemoteSession&) = delete;

  Status Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) override;
  // Invalid if ctx.sampling is not the session's (bit for bit); Corrupt if
  // the last stage answers with a token outside the vocabulary.
  Result<StepOutcome> FeedAndChoose(std::span<const uint32_t> tokens,
                                    const StepContext& ctx) override;
  // Validated locally (as KvCache::Evict would), then applied on every stage.
  Status Evict(uint32_t from, uint32_t count) override;
  // Rows computed together on the workers (remote_session_rows.cc); with
  // --ship-logits, or a single row, one FeedAndChoose per step.
  Status FeedRows(std::span<const uint32_t> tokens, uint32_t rows, const StepContext& ctx,
                  RowSteps* out) override;
  static constexpr uint32_t kStepRowsPerRequest = 64;
  // The next FeedAndChoose relays `steps` steps after it (not with
  // --ship-logits, which chooses on the coordinator).
  void ExpectChainedSteps(uint32_t steps) override { ahead_ = steps; }
  uint32_t CacheLength() const override { return history_.length(); }
  // Traced sessions: the last step's digests, one per model layer (the
  // last stage's reply carries them; Corrupt if it has another count).
  std::span<const Digest> StepTrace() const override { return trace_; }

  // Several sessions' FeedAndChoose as one round (remote_session_batch.cc):
  // every step is sent before any is awaited, so the workers find them
  // queued together and batch them, with no thread per session. A session
  // that cannot join the round (a relay or a rebuild pending,
  // --ship-logits, other sampling) runs FeedAndChoose by itself after the
  // round was sent. Each step's outcome or failure goes to its own
  // out/status; one session's failure does not touch another.
  struct BatchedStep {
    RemoteSession* session = nullptr;
    std::span<const uint32_t> tokens;
    const StepContext* ctx = nullptr;
    StepOutcome* out = nullptr;
    Status* status = nullptr;
  };
  static void FeedAndChooseAll(std::span<const BatchedStep> steps);

  // Feeds tokens whose outputs nobody needs (a prompt chunk that is not the
  // last): sent with no_output, so the last stage computes no logits and
  // replies nothing, and not awaited. A failure surfaces at the session's
  // next awaited step (the coordinator keeps a session's first error).
  Status FeedWithoutOutput(std::span<const uint32_t> tokens);

  // A new session holding a copy of this one's cache (prefix reuse); each
  // stage reserves reserve_positions entries for it (a hint, as
  // SessionOpen's), so its decode steps do not allocate.
  Result<std::unique_ptr<RemoteSession>> Fork(uint32_t reserve_positions = 0);
  // The session's id on the workers (a rebuild gives it a fresh one).
  uint64_t id() const { return open_.session_id; }

 private:
  using StepReply = SessionLink::StepReply;

  // The relay in progress: steps the pipeline still runs by itself, the
  // token the next one feeds (the last outcome's) and its decode step.
  struct Relay {
    uint32_t left = 0;
    uint32_t token = 0;
    uint32_t decode_step = 0;
  };

  // Whether a step can join a FeedAndChooseAll round as it is.
  bool CanJoinRound(const StepContext& ctx);
  // The tail of a round's step once its reply came (as Send and
  // FeedAndChoose finish a step).
  Result<StepOutcome> FinishRound(std::span<const uint32_t> tokens, const StepContext& ctx,
                                  SessionLink::ReplyResult reply);

  // Sends the tokens (with `handoff`, if any, asking for `relay` relayed
  // steps after it) and waits for the reply, rebuilding the session first
  // whenever a recovery happened since it was last built; records the feed
  // in the history once it succeeded.
  Result<StepReply> Send(std::span<const uint32_t> tokens,
                         std::optional<wire::ChainHandoff> handoff, uint32_t relay = 0,
                         uint16_t step_rows = 0);
  // Rebuilds the session if a recovery happened since it was built, after
  // waiting for any recovery in progress; retried while recoveries follow.
  Status Current();
  // One TokenInput at `first_position` and its reply, or the failure.
  Result<StepReply> Exchange(std::span<const uint32_t> tokens, uint32_t first_position,
                             std::optional<wire::ChainHandoff> handoff, uint32_t relay = 0,
                             uint16_t step_rows = 0);
  // One request of a multi-row step: `tokens` whose last `rows` rows are
  // steps ctx.step.., `next` the tokens fed after them. Appends the kept
  // rows to *out, advances the chain, evicts the rest; *ended when a kept
  // row's token differs from the token fed after it.
  Status RowRequest(std::span<const uint32_t> tokens, uint32_t rows,
                    std::span<const uint32_t> next, const StepContext& ctx, RowSteps* out,
                    bool* ended);
  // The StepResult of the next relayed step (whose request number is
  // step_ - relay_.left); advances relay_. The relay ends on any failure.
  Result<wire::StepResult> TakeRelayed();
  // Collects the steps still relayed and evicts their positions: the
  // session is then as if it had never run them.
  Status EndRelay();
  // A StepResult's token, trace and chain: the step's outcome.
  Result<StepOutcome> Outcome(wire::StepResult got, const StepContext& ctx);
  // Releases the session, reopens it under a fresh id and replays the
  // history; `epoch` is the link's epoch it is rebuilt for.
  Status Rebuild(uint64_t epoch);
  Status CheckVocab(const char* what, uint64_t got) const;
  // The next step's input (numbers the step).
  wire::TokenInput NextInput(std::span<const uint32_t> tokens, uint32_t first_position);
  Status TakeTrace(std::vector<Digest> digests);

  SessionLink& link_;
  wire::SessionOpen open_;  // open_.session_id is the session's current id
  uint32_t step_ = 0;
  SamplingParams sampling_;
  uint64_t epoch_;                // the recovery epoch it was (re)built at
  SessionHistory history_;        // what a rebuild replays
  std::vector<Digest> trace_;     // [layers], the last step's when open_.trace
  uint32_t ahead_ = 0;            // ExpectChainedSteps' promise, for the next request
  Relay relay_;
};

}  // namespace lockstep
