#include "coordinator/recovery_machine.h"

#include <algorithm>
#include <utility>

#include "coordinator/assign_reply.h"
#include "coordinator/coordinator.h"

namespace lockstep {

RecoveryMachine::RecoveryMachine(std::vector<Stage> stages, std::vector<SpareWorker> spares,
                                 WitnessSeed seed, std::chrono::milliseconds request_timeout)
    : stages_(std::move(stages)),
      spares_(std::move(spares)),
      seed_(seed),
      request_timeout_(request_timeout),
      hello_seen_(stages_.size(), false) {}

std::optional<RecoveryMachine::Clock::time_point> RecoveryMachine::deadline() const {
  if (!recovering()) return std::nullopt;
  return deadline_;
}

std::string RecoveryMachine::Describe(size_t k) const {
  WorkerInfo w;
  w.index = k;
  w.endpoint = stages_[k].endpoint;
  w.spec = stages_[k].spec;
  return w.Describe();
}

// ---- events -------------------------------------------------------------------

void RecoveryMachine::OnDead(size_t k, const Status& dead, Clock::time_point now,
                             std::vector<RecoveryAction>* out) {
  if (state_ == State::kFailed || k >= stages_.size()) return;
  MarkStage(k, dead, out);
  if (recovering()) {
    // The spare itself died while loading: the next one. A neighbour that
    // dies while being re-wired cannot be waited for. Any other stage is
    // handled once this recovery is done.
    if (k == stage_ && state_ == State::kReassigning) return WaitFailed(dead, now, out);
    if (Awaits(k)) return Fail(dead.WithContext("while rebuilding " + Describe(stage_)), out);
    return;
  }
  if (spares_.empty() || shutting_down_) return Fail(dead, out);
  if (next_spare_ >= spares_.size()) {
    return Fail(Status(dead.kind(), dead.message() + "; no spare left to rebuild its stage on"),
                out);
  }
  state_ = State::kReassigning;
  stage_ = k;
  cause_ = dead;
  const Status rebuilding(dead.kind(), dead.message() + "; rebuilding its stage on a spare");
  out->push_back(RecoveryAction{RecoveryAction::Kind::kLog, k, {}, "", "", rebuilding.message()});
  out->push_back(RecoveryAction{RecoveryAction::Kind::kBeginRecovery, k, rebuilding, "", "", ""});
  TrySpare(now, out);
}

bool RecoveryMachine::OnMessage(size_t k, const wire::Message& m, Clock::time_point now,
                                std::vector<RecoveryAction>* out) {
  if (!recovering() || !Awaits(k) || !IsAssignReply(m)) return false;
  bool hello_seen = hello_seen_[k];
  bool acked = false;
  const Status st =
      CheckAssignReply(Describe(k), k, stages_[k].spec, seed_, m, &hello_seen, &acked);
  hello_seen_[k] = hello_seen;
  if (!st.ok()) {
    WaitFailed(st, now, out);
    return true;
  }
  if (!acked) return true;
  awaiting_.erase(std::remove(awaiting_.begin(), awaiting_.end(), k), awaiting_.end());
  if (!awaiting_.empty()) return true;
  if (state_ == State::kReassigning) {
    Rewire(now, out);
  } else {
    Done(out);
  }
  return true;
}

void RecoveryMachine::OnAssignNotSent(size_t k, const Status& why, Clock::time_point now,
                                      std::vector<RecoveryAction>* out) {
  if (!recovering() || !Awaits(k)) return;
  WaitFailed(why, now, out);
}

void RecoveryMachine::OnLinkRefused(size_t k, const Status& why, Clock::time_point now,
                                    std::vector<RecoveryAction>* out) {
  if (!recovering() || !Awaits(k)) return;
  WaitFailed(why, now, out);
}

void RecoveryMachine::OnTick(Clock::time_point now, std::vector<RecoveryAction>* out) {
  if (!recovering() || now < deadline_) return;
  const size_t late = awaiting_.empty() ? stage_ : awaiting_.front();
  WaitFailed(TimeoutError(Describe(late) + " did not acknowledge its assignment within " +
                          std::to_string(request_timeout_.count()) + " ms"),
             now, out);
}

// ---- transitions --------------------------------------------------------------

bool RecoveryMachine::Awaits(size_t k) const {
  return std::find(awaiting_.begin(), awaiting_.end(), k) != awaiting_.end();
}

void RecoveryMachine::Await(size_t k) {
  awaiting_.push_back(k);
  hello_seen_[k] = false;  // every Assign is answered with a Hello of its own
}

void RecoveryMachine::TrySpare(Clock::time_point now, std::vector<RecoveryAction>* out) {
  while (next_spare_ < spares_.size()) {
    const SpareWorker& spare = spares_[next_spare_++];
    // A spare naming a live stage's address is that worker, not a spare.
    bool live = false;
    for (size_t j = 0; j < stages_.size(); ++j) {
      live |= j != stage_ && stages_[j].endpoint == spare.endpoint;
    }
    if (live) continue;
    stages_[stage_].endpoint = spare.endpoint;
    stages_[stage_].key = spare.key;
    state_ = State::kReassigning;
    awaiting_.clear();
    Await(stage_);
    deadline_ = now + request_timeout_;
    const StageSpec& spec = stages_[stage_].spec;
    MarkStage(stage_,
              Status(cause_.kind(),
                     "being rebuilt on the spare " + spare.endpoint + ": " + cause_.message()),
              out);
    out->push_back(RecoveryAction{RecoveryAction::Kind::kLog, stage_, {}, "", "",
                                  "assigning layers [" + std::to_string(spec.lo) + "," +
                                      std::to_string(spec.hi) + ") to the spare " +
                                      spare.endpoint});
    out->push_back(RecoveryAction{RecoveryAction::Kind::kAssignSpare, stage_, {}, spare.endpoint,
                                  spare.key, ""});
    return;
  }
  Fail(Status(cause_.kind(), cause_.message() + "; no spare left to rebuild its stage on"), out);
}

void RecoveryMachine::WaitFailed(const Status& st, Clock::time_point now,
                                 std::vector<RecoveryAction>* out) {
  if (state_ == State::kReassigning) {
    out->push_back(RecoveryAction{RecoveryAction::Kind::kLog, stage_, {}, "", "",
                                  st.ToString() + "; trying the next spare"});
    return TrySpare(now, out);
  }
  Fail(st.WithContext("while re-wiring around " + Describe(stage_)), out);
}

void RecoveryMachine::Rewire(Clock::time_point now, std::vector<RecoveryAction>* out) {
  // The neighbours keep their stage and sessions; only their links change
  // (a worker applies an Assign of the stage it holds in place). The first
  // and the last stage are neighbours too: relayed steps go from the last
  // to the first.
  state_ = State::kRewiring;
  deadline_ = now + request_timeout_;
  const size_t n = stages_.size();
  for (size_t j : {(stage_ + n - 1) % n, (stage_ + 1) % n}) {
    if (j == stage_ || Awaits(j)) continue;
    Await(j);
    out->push_back(RecoveryAction{RecoveryAction::Kind::kRewire, j, {}, "", "", ""});
  }
  if (awaiting_.empty()) Done(out);
}

void RecoveryMachine::Done(std::vector<RecoveryAction>* out) {
  out->push_back(RecoveryAction{RecoveryAction::Kind::kLog, stage_, {}, "", "",
                                "stage " + std::to_string(stage_) + " rebuilt: " +
                                    Describe(stage_) + " serves it"});
  MarkStage(stage_, Status::Ok(), out);
  out->push_back(RecoveryAction{RecoveryAction::Kind::kRecovered, stage_, {}, "", "", ""});
  state_ = State::kHealthy;
  awaiting_.clear();
}

void RecoveryMachine::Fail(const Status& st, std::vector<RecoveryAction>* out) {
  if (recovering()) MarkStage(stage_, st, out);
  state_ = State::kFailed;
  awaiting_.clear();
  out->push_back(RecoveryAction{RecoveryAction::Kind::kFail, stage_, st, "", "", ""});
}

void RecoveryMachine::MarkStage(size_t k, const Status& st,
                                std::vector<RecoveryAction>* out) const {
  out->push_back(
      RecoveryAction{RecoveryAction::Kind::kMarkStage, k, st, stages_[k].endpoint, "", ""});
}

}  // namespace lockstep
