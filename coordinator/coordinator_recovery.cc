// CoordinatorImpl recovery (declared in coordinator_impl.h): a dead stage rebuilt on
// a spare worker. All of it runs on the I/O thread.
#include <algorithm>
#include <iostream>
#include <utility>

#include "coordinator/coordinator_impl.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;

void Log(const std::string& line) { std::cerr << "lockstep coordinator: " << line << "\n"; }

}  // namespace

Status CoordinatorImpl::AwaitRecovery() const {
  const auto bound = (wait_bound() + config_.request_timeout) *
                     static_cast<int64_t>(config_.spares.size() + 1);
  std::unique_lock<std::mutex> lock(mu_);
  if (!recovered_.wait_for(lock, bound, [&] { return !recovering_ || !broken_.ok(); })) {
    return TimeoutError("coordinator: a recovery did not finish within " +
                        std::to_string(bound.count()) + " ms");
  }
  return broken_;
}

uint64_t CoordinatorImpl::recoveries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return recoveries_;
}

void CoordinatorImpl::SetStage(size_t k, const Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  StageState& s = stages_[k];
  if (s.endpoint != endpoints_[k]) s.replaced.push_back(std::exchange(s.endpoint, endpoints_[k]));
  s.status = st;
}

void CoordinatorImpl::Break(const Status& st) {
  if (recovery_) SetStage(recovery_->stage, st);
  {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = st;
    recovering_ = false;
  }
  recovered_.notify_all();
  dead_ = true;
  recovery_.reset();
  deferred_.clear();
  replies_.FailAll(st);
}

void CoordinatorImpl::OnDead(size_t k, const Status& dead) {
  SetStage(k, dead);
  if (recovery_) {
    // The spare itself died while loading: the next one. A neighbour that
    // dies while being re-wired cannot be waited for. Any other stage is
    // handled once this recovery is done (its link stays dead).
    if (k == recovery_->stage && recovery_->phase == Recovery::Phase::kLoading) {
      return RecoveryFailed(dead);
    }
    if (std::count(recovery_->awaiting.begin(), recovery_->awaiting.end(), k)) {
      return Break(dead.WithContext("while rebuilding " + Describe(recovery_->stage)));
    }
    return;
  }
  if (config_.spares.empty() || shutting_down_) return Break(dead);
  if (next_spare_ >= config_.spares.size()) {
    return Break(Status(dead.kind(), dead.message() + "; no spare left to rebuild its stage on"));
  }
  // The epoch moves before anything fails, so a session that sees its step
  // fail also sees that it must rebuild.
  epoch_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    recovering_ = true;
  }
  Log(dead.message() + "; rebuilding its stage on a spare");
  recovery_ = Recovery{k, dead, Recovery::Phase::kLoading, {}, Clock::now()};
  replies_.FailAll(Status(dead.kind(), dead.message() + "; rebuilding its stage on a spare"));
  TrySpare();
}

void CoordinatorImpl::TrySpare() {
  const size_t k = recovery_->stage;
  while (next_spare_ < config_.spares.size()) {
    const SpareWorker& spare = config_.spares[next_spare_++];
    // A spare naming a live stage's address is that worker, not a spare.
    bool live = false;
    for (size_t j = 0; j < endpoints_.size(); ++j) live |= j != k && endpoints_[j] == spare.endpoint;
    if (live) continue;
    Result<Link> link = MakeLink(spare.endpoint, spare.key);
    if (!link.ok()) {
      Log("spare " + spare.endpoint + ": " + link.status().ToString());
      continue;
    }
    // The dead worker's link goes at once (no linger): a worker restarted
    // on that address must meet only the new link under our identity.
    links_[k].client.socket().set(zmq::sockopt::linger, 0);
    links_[k].monitor.Stop();
    links_[k] = std::move(link).value();
    endpoints_[k] = spare.endpoint;
    keys_[k] = spare.key;
    recovery_->phase = Recovery::Phase::kLoading;
    recovery_->awaiting = {k};
    recovery_->deadline = Clock::now() + config_.request_timeout;
    SetStage(k, Status(recovery_->cause.kind(), "being rebuilt on the spare " + spare.endpoint +
                                                    ": " + recovery_->cause.message()));
    Log("assigning layers [" + std::to_string(workers_[k].spec.lo) + "," +
        std::to_string(workers_[k].spec.hi) + ") to the spare " + spare.endpoint);
    if (SendTo(k, wire::MarshalMessage(MakeAssign(k))).ok()) return;
  }
  Break(Status(recovery_->cause.kind(),
               recovery_->cause.message() + "; no spare left to rebuild its stage on"));
}

bool CoordinatorImpl::OnRecoveryMessage(size_t k, const wire::Message& m) {
  if (!std::count(recovery_->awaiting.begin(), recovery_->awaiting.end(), k)) return false;
  const auto* err = std::get_if<wire::ErrorReport>(&m);
  const bool handshake = std::holds_alternative<wire::Hello>(m) ||
                         std::holds_alternative<wire::AssignAck>(m) ||
                         (err != nullptr && !err->has_session);
  if (!handshake) return false;
  bool acked = false;
  const Status st = OnHandshakeMessage(k, m, &acked, nullptr);
  if (!st.ok()) {
    RecoveryFailed(st);
    return true;
  }
  if (acked) {
    auto& w = recovery_->awaiting;
    w.erase(std::remove(w.begin(), w.end(), k), w.end());
    if (w.empty()) AdvanceRecovery();
  }
  return true;
}

void CoordinatorImpl::RecoveryFailed(const Status& st) {
  if (recovery_->phase == Recovery::Phase::kLoading) {
    Log(st.ToString() + "; trying the next spare");
    return TrySpare();
  }
  Break(st.WithContext("while re-wiring around " + Describe(recovery_->stage)));
}

void CoordinatorImpl::AdvanceRecovery() {
  const size_t k = recovery_->stage;
  if (recovery_->phase == Recovery::Phase::kLoading) {
    // The neighbours keep their stage and sessions; only their links change
    // (the worker applies an Assign of the same stage in place). The first
    // and the last stage are neighbours too: relayed steps go from the
    // last to the first.
    recovery_->phase = Recovery::Phase::kRewiring;
    recovery_->deadline = Clock::now() + config_.request_timeout;
    const size_t n = workers_.size();
    for (size_t j : {(k + n - 1) % n, (k + 1) % n}) {
      if (j == k || std::count(recovery_->awaiting.begin(), recovery_->awaiting.end(), j)) {
        continue;
      }
      recovery_->awaiting.push_back(j);
      const Status sent = SendTo(j, wire::MarshalMessage(MakeAssign(j)));
      if (!sent.ok()) return Break(sent.WithContext("while re-wiring around " + Describe(k)));
    }
    if (!recovery_->awaiting.empty()) return;
  }
  Log("stage " + std::to_string(k) + " rebuilt: " + Describe(k) + " serves it");
  SetStage(k, Status::Ok());
  recovery_.reset();
  replies_.ClearSticky();  // errors of sessions from before: each rebuilds under a new id
  for (const wire::Frame& f : deferred_) (void)SendTo(0, f);
  deferred_.clear();
  {
    std::lock_guard<std::mutex> lock(mu_);
    recovering_ = false;
    ++recoveries_;
  }
  recovered_.notify_all();
}

void CoordinatorImpl::CheckRecoveryDeadline(Clock::time_point now) {
  if (!recovery_) return;
  for (size_t k : recovery_->awaiting) {
    if (!links_[k].refused.ok()) return RecoveryFailed(links_[k].refused.WithContext(Describe(k)));
  }
  if (now < recovery_->deadline) return;
  RecoveryFailed(TimeoutError(Describe(recovery_->awaiting.empty() ? recovery_->stage
                                                                   : recovery_->awaiting[0]) +
                              " did not acknowledge its assignment within " +
                              std::to_string(config_.request_timeout.count()) + " ms"));
}

}  // namespace lockstep
