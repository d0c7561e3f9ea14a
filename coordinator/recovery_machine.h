// RecoveryMachine: the rebuilding of a dead stage on a spare worker, as a
// pure state machine (docs/deployment.md, "Recovery"). It owns who serves
// each stage (endpoint and pinned key), the spare cursor (each spare is
// used once, in order), the Assign replies awaited and the deadline. It
// reads no clock, sends nothing and starts no thread: the coordinator's
// I/O loop feeds it events (a stage is dead, a message came from a stage,
// an Assign could not be sent, a link was refused, the time is now) and
// carries out the actions it returns, in order.
//
//              stage k dead,                 the spare's Hello
//              a spare left                  and AssignAck
//   healthy ───────────────▶ reassigning ─────────────────▶ rewiring
//     │ ▲                     │  ▲    │                       │    │
//     │ │                     │  └────┘ the spare refused,    │    │
//     │ │                     │  died, was silent, its link   │    │
//     │ │                     │  was refused or the deadline  │    │
//     │ │                     │  passed: the next spare       │    │
//     │ └─────────────────────┼───────────────────────────────┘    │
//     │      both neighbours  │ no spare left     a neighbour refused,
//     │      acknowledged     ▼                   died, could not be sent
//     └──────────────────▶ failed ◀─────────────── to or the deadline passed
//      dead with no spare
//      listed, the spares used
//      up, or workers shut down
//
// reassigning: the spare has stage k's Assign (same layers, next hop and
// keys) and loads; its Hello and AssignAck are checked (assign_reply.h).
// rewiring: stages k-1 and k+1 (the first and the last are neighbours
// too: relayed steps go from the last to the first) get their own Assign
// again with only the links changed, and their replies are awaited.
// Each of the two waits lasts at most `request_timeout` from its Assign.
// failed is final: every event is ignored. A stage that dies while
// another is rebuilt and is neither awaited nor the one being loaded is
// only marked dead: its death is reported again once the pipeline is
// whole (the coordinator's liveness keeps finding it dead). Messages from
// stages not awaited, and those that are no Assign reply, are not the
// machine's (OnMessage returns false).
//
// Actions: the caller carries them out in order. kAssignSpare and kRewire
// send, and can fail: when one does, the caller stops, drops the actions
// after it and feeds OnAssignNotSent, whose actions it then carries out.
// kFail's status names the worker at fault (endpoint, stage and layers):
// the dead one, the neighbour that failed the re-wiring (and the stage
// rebuilt), or the one that did not acknowledge (Timeout).
//
// Thread-compatible: the I/O loop owns it.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "coordinator/cluster_config.h"
#include "engine/stage_tensors.h"
#include "engine/witness.h"
#include "wire/messages.h"

namespace lockstep {

struct RecoveryAction {
  enum class Kind {
    // Publish: `stage` is served by `endpoint`, with `status` (Ok, dead,
    // being rebuilt, failed).
    kMarkStage,
    // A recovery starts: the recovery epoch moves on, then every reply in
    // flight fails with `status`; later requests wait for kRecovered.
    kBeginRecovery,
    // `stage` moves to the spare `endpoint` (pinned `key`): the old link
    // goes at once, a new one is made and the stage's Assign is sent on
    // it. Can fail.
    kAssignSpare,
    // `stage` is sent its Assign again (its links changed). Can fail.
    kRewire,
    // The pipeline is whole again: posts held meanwhile go out, sticky
    // errors of the sessions from before are forgotten.
    kRecovered,
    // The cluster is broken for good with `status`: every reply in flight
    // and every later request fails with it.
    kFail,
    // A line for the operator's log (`status` holds no error: see text).
    kLog,
  };
  Kind kind = Kind::kLog;
  size_t stage = 0;
  Status status;
  std::string endpoint;  // kMarkStage, kAssignSpare
  std::string key;       // kAssignSpare
  std::string text;      // kLog
};

class RecoveryMachine {
 public:
  using Clock = std::chrono::steady_clock;
  enum class State { kHealthy, kReassigning, kRewiring, kFailed };

  // One stage: its layers and who serves it at the start.
  struct Stage {
    StageSpec spec;
    std::string endpoint;
    std::string key;  // pinned Z85 public key ("" if none)
  };

  RecoveryMachine(std::vector<Stage> stages, std::vector<SpareWorker> spares, WitnessSeed seed,
                  std::chrono::milliseconds request_timeout);

  // ---- events: each appends the actions to carry out to `out` ----
  // Stage k was found dead (`dead` names it and why).
  void OnDead(size_t k, const Status& dead, Clock::time_point now,
              std::vector<RecoveryAction>* out);
  // A message from stage k's worker: true when it was an awaited Assign
  // reply (the machine's), false when the caller handles it as usual.
  bool OnMessage(size_t k, const wire::Message& m, Clock::time_point now,
                 std::vector<RecoveryAction>* out);
  // The kAssignSpare or kRewire of stage k could not be carried out.
  void OnAssignNotSent(size_t k, const Status& why, Clock::time_point now,
                       std::vector<RecoveryAction>* out);
  // Stage k's link refused the CURVE handshake (`why` names the worker):
  // counts only while its reply is awaited.
  void OnLinkRefused(size_t k, const Status& why, Clock::time_point now,
                     std::vector<RecoveryAction>* out);
  // The time is now: a wait past its deadline fails.
  void OnTick(Clock::time_point now, std::vector<RecoveryAction>* out);
  // Workers were asked to exit: a death from now on is not rebuilt.
  void OnWorkersShutDown() { shutting_down_ = true; }

  // ---- state ----
  State state() const { return state_; }
  bool recovering() const { return state_ == State::kReassigning || state_ == State::kRewiring; }
  // The stage being rebuilt. REQUIRES: recovering().
  size_t rebuilding() const { return stage_; }
  // When the current wait fails (nullopt unless recovering()).
  std::optional<Clock::time_point> deadline() const;
  // Stages whose Assign reply is awaited.
  const std::vector<size_t>& awaiting() const { return awaiting_; }
  const std::string& endpoint(size_t k) const { return stages_[k].endpoint; }
  const std::string& key(size_t k) const { return stages_[k].key; }
  size_t stage_count() const { return stages_.size(); }
  // "worker tcp://... (stage 1, layers [10,20))", its current worker.
  std::string Describe(size_t k) const;

 private:
  bool Awaits(size_t k) const;
  void Await(size_t k);  // its Assign was just sent
  void TrySpare(Clock::time_point now, std::vector<RecoveryAction>* out);
  // The current wait failed: the next spare while reassigning, else failed.
  void WaitFailed(const Status& st, Clock::time_point now, std::vector<RecoveryAction>* out);
  void Rewire(Clock::time_point now, std::vector<RecoveryAction>* out);
  void Done(std::vector<RecoveryAction>* out);
  void Fail(const Status& st, std::vector<RecoveryAction>* out);
  void MarkStage(size_t k, const Status& st, std::vector<RecoveryAction>* out) const;

  std::vector<Stage> stages_;
  const std::vector<SpareWorker> spares_;
  const WitnessSeed seed_;
  const std::chrono::milliseconds request_timeout_;
  State state_ = State::kHealthy;
  size_t next_spare_ = 0;  // spares_ used so far
  bool shutting_down_ = false;
  size_t stage_ = 0;  // the stage being rebuilt
  Status cause_;      // its death, naming the dead worker
  std::vector<size_t> awaiting_;  // in the order their Assigns were sent
  std::vector<bool> hello_seen_;  // [stage]: its Hello for the Assign awaited came
  Clock::time_point deadline_;
};

}  // namespace lockstep
