// Scheduler: continuous batching over one in-process Stage holding every
// layer, or over a cluster (a Coordinator and its workers). Every request
// is a DecodeSession (engine/decode_session.h), the state machine `run`
// decodes with too, and one thread advances every active session by one
// step per turn through a BatchStepper (engine/batch_stepper.h): in
// process one ForwardBatch + LogitsBatch (LocalBatchStepper), on a cluster
// every session's step sent at once and then all awaited, the workers
// batching what they find queued (runtime::ClusterBatchStepper; no thread
// per session or per step). New requests are admitted and finished or
// cancelled ones retired between steps. A prompt is prefilled in chunks
// of at most `prefill_chunk` tokens per step (all prefilling sessions
// share that budget), so a long prompt delays the others' next token by
// one chunk, not by the whole prompt. A session's cache (in process) or
// its sessions on the workers are reserved for prompt + max_tokens
// positions when it is admitted, so its decode steps allocate nothing.
//
// Bits: a session's logits do not depend on what it is batched with, on
// how its prompt is chunked, or on whether its prefix came from the
// PrefixCache (engine/stage.h, engine/prefix.h), and tokens are chosen by
// ChooseAndWitness with the step index — so every session's tokens and
// digests equal its solo `lockstep run`.
//
// A request asking for `speculative` decoding prefills in the batch like
// any other and then steps alone, one multi-row step per turn
// (StepSpeculatively, engine/speculative.h: its proposals checked in one
// pass, on the workers on a cluster), between the batch's turns; its tokens
// and digests are its plain decode's.
//
// A cluster session whose step fails (a worker died, a timeout) is closed
// with reason "error" naming the worker; the others carry on. A session
// the workers refuse for capacity (their session or KV limits) is closed
// as overloaded (the client gets 429), after the prefix cache gave back
// what it held on them. On a cluster the prefix cache holds RemoteSessions
// parked on the workers (a hit is a Fork on every worker, its budget counts
// the KV bytes they hold there, its entries at most `prefix_sessions`), and
// a greedy session is opened with the default sampling parameters
// (temperature 0 ignores the rest), so greedy prompts share entries
// whatever seed their requests carry. An entry whose fork fails (its
// session is gone from a worker) is dropped and the prompt recomputed.
//
// Limits, checked in Submit before any work: sessions (queued + active,
// a determinism_check twin counts) and KV bytes reserved for
// prompt + max_tokens positions; over either -> 429 with Retry-After.
// Thread-safe: Submit from any thread; one internal step thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <variant>
#include <vector>

#include "coordinator/coordinator.h"
#include "engine/batch_stepper.h"
#include "engine/stage.h"
#include "engine/step_outcome.h"
#include "engine/tokenizer/tokenizer.h"
#include "engine/witness.h"
#include "server/api_error.h"
#include "server/generation.h"
#include "server/metrics.h"
#include "server/prefix_cache.h"

namespace lockstep::server {

struct SchedulerOptions {
  size_t max_sessions = 64;
  uint64_t kv_budget_bytes = 2048ull << 20;
  uint64_t prefix_budget_bytes = 256ull << 20;
  size_t prefill_chunk = 64;
  size_t min_prefix_tokens = 4;  // shorter shared prefixes are recomputed
  // On a cluster: prefix entries held as sessions on the workers, at most.
  // Every entry is a session on each worker, so max_sessions (twins
  // included) + prefix_sessions must stay within the workers' own limit
  // (Limits::sessions_per_coordinator).
  size_t prefix_sessions = 16;
};

// Where the forwards run: exactly one of the two is set; it outlives the
// scheduler. stage: first and last (every layer).
struct SchedulerBackend {
  const Stage* stage = nullptr;
  Coordinator* cluster = nullptr;
};

// Where a `speculative` request's proposals come from: prompt lookup, or
// (stage set: every layer of a draft model with the served model's
// tokenizer, outliving the scheduler) that draft's greedy guesses
// (engine/draft_proposals.h), each session with a draft cache of its own
// whose bytes count against kv_budget. Either way the answers and
// receipts are plain decoding's.
struct DraftSource {
  const Stage* stage = nullptr;
  uint32_t max_positions = 0;  // the draft's (MaxPositions of its config)
};

class Scheduler {
 public:
  // tokenizer may be null (then stop strings are refused by the caller).
  // eos: ids that end a generation with finish_reason "stop".
  Scheduler(SchedulerBackend backend, const WitnessSeed& seed, const Tokenizer* tokenizer,
            std::vector<uint32_t> eos, SchedulerOptions options, Metrics& metrics,
            DraftSource draft = {});
  ~Scheduler();  // Shutdown(0) if still running

  std::variant<std::shared_ptr<GenerationStream>, ApiError> Submit(GenerationSpec spec);

  // Refuses new work (503), lets in-flight sessions run for up to `grace`,
  // then closes the rest with reason "cancelled", and joins the thread.
  void Shutdown(std::chrono::milliseconds grace);

  uint64_t BytesPerPosition() const { return bytes_per_position_; }
  size_t ActiveSessions() const;

 private:
  struct Session;
  void Loop();
  void Admit(std::unique_ptr<Session> s);
  // The session's decode (and its speculation, when asked for) on its
  // backend, whose cache holds the first `cached` prompt tokens.
  void StartDecode(Session& s, size_t cached);
  // The session's backend: a prefix hit, or a fresh cache / cluster session.
  Status OpenLocal(Session& s);
  Status OpenCluster(Session& s);
  void Step();
  // After a step: tokens out, the prefix kept, finished sessions retired.
  void AfterStep(Session& s, const Status& st);
  // The cluster's link bytes, per-stage compute time and bytes per hop
  // into the metrics (their source, run at each render).
  void ReportStages();
  // A failed step or open: a prefix found gone is forgotten and the
  // session recomputed once; else the session is retired (as overloaded
  // when the workers refused it for capacity).
  void Failed(Session& s, const Status& st);
  StopRule StopRuleOf(const Session& s) const;
  void Retire(Session& s, std::string reason, std::string error, bool overloaded = false);
  const Stage* stage_;
  Coordinator* cluster_;
  WitnessSeed seed_;
  const Tokenizer* tokenizer_;
  std::vector<uint32_t> eos_;
  SchedulerOptions options_;
  Metrics& metrics_;
  uint64_t bytes_per_position_;
  DraftSource draft_;
  uint64_t draft_bytes_per_position_;  // 0 without a draft

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Session>> queued_;  // guarded by mu_
  size_t sessions_ = 0;                           // queued + active, guarded
  uint64_t reserved_bytes_ = 0;                   // guarded
  bool stopping_ = false;                         // guarded
  std::chrono::steady_clock::time_point deadline_;  // guarded; valid when stopping_

  // Step thread only.
  std::vector<std::unique_ptr<Session>> active_;
  PrefixCache<KvCache> prefix_;                                // in process
  PrefixCache<std::unique_ptr<RemoteSession>> remote_prefix_;  // on a cluster
  std::unique_ptr<LocalBatchStepper> local_stepper_;  // in process
  std::unique_ptr<BatchStepper> stepper_;             // local_stepper_ or the cluster's
  std::vector<DecodeSession*> batch_;
  std::vector<Status> status_;
  std::vector<size_t> batched_, alone_;  // indices into active_: in the batch, stepping alone
  std::vector<Status> step_status_;      // [active_]
  std::thread thread_;
};

}  // namespace lockstep::server
