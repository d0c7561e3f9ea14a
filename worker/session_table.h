// SessionTable: the sessions one stage holds (StageHost's, worker/stage_host.h)
// and the rules about them that need no model: opening (sampling
// validated, attention windows set, the SessionOpen's reserve hint taken
// only within the model's positions and the KV budget), evicting, forking
// and releasing; the sticky failure of a session (every later request of
// it reports the first error); and, through step_rules (worker/step_rules.h),
// the first stage's relay state, the position bound (base/limits.h) and the
// KV memory budget (bytes per entry from engine/kv_bytes.h) applied to the
// session a step names. Every refusal names what is wrong; a refused
// request leaves the table as it was.
//
// The KV budget counts the entries every session holds plus those of the
// batch being gathered (HoldForBatch), which are not in any cache yet.
// Thread-compatible: owned by the StageHost's thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "base/status.h"
#include "engine/kv_cache.h"
#include "engine/sampling.h"
#include "wire/messages.h"
#include "worker/step_rules.h"

namespace lockstep {

// The session `m` is about (a Fork: the new one); *has is false for a
// message about none (then 0).
uint64_t SessionOfMessage(const wire::Message& m, bool* has);
// The step of a TokenInput or HiddenFrame; 0 for other messages.
uint32_t StepOfMessage(const wire::Message& m);

// One session on a stage.
struct StageSession {
  StageSession(KvCache c, SamplingParams p) : cache(std::move(c)), sampling(p) {}
  KvCache cache;            // the stage's layers only
  SamplingParams sampling;  // how the last stage chooses this session's tokens
  bool trace = false;       // report per-layer digests with every step
  Status failed;            // sticky: every later request of the session reports it
  step_rules::RelayState relay;  // first stage: the relayed steps still to come
};

class SessionTable {
 public:
  // The stage the sessions are on, set at each Assign.
  struct Stage {
    uint64_t entry_bytes = 0;    // bytes one cache entry takes (0: budget not checked)
    uint32_t max_positions = 0;  // the model's position bound (0: none)
    int num_layers = 0;          // a per-layer window list has one entry per layer
    bool is_first = false;       // steps arrive as TokenInputs, else as HiddenFrames
    uint32_t layer_lo = 0;       // where a hidden frame for this stage resumes
    size_t hidden = 0;           // the model's hidden width
    std::string who;             // "worker W stage K layers [lo,hi)", for budget refusals
  };
  void Configure(Stage stage) { stage_ = std::move(stage); }
  // Limits::kv_bytes_per_worker (default: none).
  void set_kv_budget(uint64_t bytes) { kv_budget_ = bytes; }

  uint64_t entry_bytes() const { return stage_.entry_bytes; }
  size_t size() const { return sessions_.size(); }
  // Entries held by every session together.
  uint64_t entries() const;

  // The session, or Invalid "unknown session S", or the error it failed
  // with ("session S failed earlier: ...", of that error's kind).
  Result<StageSession*> Find(uint64_t session_id);
  // Whether the session is open and traced (false for an unknown one).
  bool IsTraced(uint64_t session_id) const;

  // Opens m.session_id over `cache`, a new cache of the stage's layers.
  // Returns how many positions it reserved for the hint (0: none), so the
  // caller can size its scratch for them.
  Result<uint64_t> Open(const wire::SessionOpen& m, KvCache cache);
  Status Evict(const wire::Evict& m);
  // A copy of the source under the new id: refused if the new id exists,
  // the source is unknown, failed or relaying, or the copy's entries would
  // pass the KV budget. Returns how many positions it reserved for the
  // copy's hint, as Open does.
  Result<uint64_t> Fork(const wire::Fork& m);
  // An unknown id changes nothing.
  void Release(uint64_t session_id) { sessions_.erase(session_id); }
  void Clear() { sessions_.clear(); }
  // Marks the session failed with `st` unless it failed already (an
  // unknown id changes nothing).
  void Fail(uint64_t session_id, const Status& st);

  // A relayed TokenInput of a session released or failed meanwhile (it was
  // in flight when the coordinator let go): dropped without a word.
  bool IsStaleRelay(const wire::Message& m) const;

  // The session TokenInput `m` steps, if the step passes every rule, in
  // this order: the stage is first; it has tokens; the session is known
  // and not failed; the relay rules (who may send it before where it
  // goes); a multi-row step's shape; its positions; the KV budget.
  Result<StageSession*> AdmitTokens(const wire::TokenInput& m);
  // After the first stage accepted TokenInput `m` of session `s`: a
  // relayed step, or one asking for relays, sets what `s` expects next.
  static void NoteRelay(StageSession& s, const wire::TokenInput& m);
  // The session HiddenFrame `m` steps, if the step passes every rule, in
  // this order: the session is known and not failed; the stage is not
  // first; the frame's width and resume layer are the stage's; a
  // multi-row step's shape; its positions; the KV budget; one layer digest
  // per earlier layer (and step row) when the session is traced, else none.
  Result<StageSession*> AdmitHidden(const wire::HiddenFrame& m);

  // Counts `entries` of a batch being gathered against the budget until
  // EndBatch.
  void HoldForBatch(uint64_t entries) { held_for_batch_ += entries; }
  void EndBatch() { held_for_batch_ = 0; }

 private:
  // Refuses an Evict or Fork (`what`) of a session that still relays.
  Status CheckNotRelaying(uint64_t session_id, const char* what) const;
  // n positions at first_position follow s's cache and fit the model.
  Status CheckPosition(const StageSession& s, uint32_t first_position, size_t n) const;
  // Ok when `entries` more fit the KV budget; `what` names the request
  // and is called only for a refusal.
  Status CheckKvBudget(uint64_t entries, const std::function<std::string()>& what) const;
  // Reserves a hint's positions (SessionOpen's, Fork's) if they fit the
  // model and the KV budget; returns how many.
  uint64_t ReserveHint(uint32_t positions, KvCache& cache) const;

  std::map<uint64_t, StageSession> sessions_;
  Stage stage_;
  uint64_t kv_budget_ = UINT64_MAX;
  uint64_t held_for_batch_ = 0;
};

}  // namespace lockstep
