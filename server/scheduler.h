// Scheduler: continuous batching over one in-process Stage holding every
// layer, or over a cluster (a Coordinator and its workers). One thread
// advances every active session by one token per step: in-process as ONE
// ForwardBatch + LogitsBatch; on a cluster every session's step is sent at
// once (RemoteSession per session) and the workers batch the steps queued
// for them as one ForwardBatch. New requests are admitted and
// finished or cancelled ones retired between steps. A prompt is prefilled
// in chunks of at most `prefill_chunk` tokens per step (all prefilling
// sessions share that budget), so a long prompt delays the others' next
// token by one chunk, not by the whole prompt.
//
// Bits: a session's logits do not depend on what it is batched with, on
// how its prompt is chunked, or on whether its prefix came from the
// PrefixCache (engine/stage.h, engine/prefix.h), and tokens are chosen by
// ChooseToken with the step index — so every session's tokens and digests
// equal its solo `lockstep run`.
//
// A cluster session whose step fails (a worker died, a timeout) is closed
// with reason "error" naming the worker; the others carry on. On a cluster
// the prefix cache holds RemoteSessions parked on the workers (a hit is a
// Fork on every worker, its budget counts the KV bytes they hold there),
// and a greedy session is opened with the default sampling parameters
// (temperature 0 ignores the rest), so greedy prompts share entries
// whatever seed their requests carry.
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
};

// Where the forwards run: exactly one of the two is set; it outlives the
// scheduler. stage: first and last (every layer).
struct SchedulerBackend {
  const Stage* stage = nullptr;
  Coordinator* cluster = nullptr;
};

class Scheduler {
 public:
  // tokenizer may be null (then stop strings are refused by the caller).
  // eos: ids that end a generation with finish_reason "stop".
  Scheduler(SchedulerBackend backend, const WitnessSeed& seed, const Tokenizer* tokenizer,
            std::vector<uint32_t> eos, SchedulerOptions options, Metrics& metrics);
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
  void AdmitCluster(std::unique_ptr<Session> s);
  void Step();
  void StepCluster();
  // The cluster's link bytes, per-stage compute time and bytes per hop
  // into the metrics (their source, run at each render).
  void ReportStages();
  // The tokens `s` feeds this step (a prompt chunk within *budget, or its
  // last token); empty when the prefill budget is spent.
  std::span<const uint32_t> StepTokens(Session& s, size_t* budget);
  // Records a chosen token (however it was chosen) and what follows it.
  void OnOutcome(Session& s, const StepOutcome& o);
  void Retire(Session& s, std::string reason, std::string error);

  const Stage* stage_;
  Coordinator* cluster_;
  WitnessSeed seed_;
  const Tokenizer* tokenizer_;
  std::vector<uint32_t> eos_;
  SchedulerOptions options_;
  Metrics& metrics_;
  uint64_t bytes_per_position_;

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
  ForwardScratch scratch_;
  std::vector<float> rows_, logits_;
  std::vector<StepChoice> choices_;  // the step's emitting sessions
  std::vector<StepOutcome> outcomes_;
  std::thread thread_;
};

}  // namespace lockstep::server
