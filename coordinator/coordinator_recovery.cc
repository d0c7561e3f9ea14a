// CoordinatorImpl recovery (declared in coordinator_impl.h): the I/O loop
// feeds recovery_ (RecoveryMachine) its events and carries out the
// actions it returns. All of it runs on the I/O thread.
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

void CoordinatorImpl::SetStage(size_t k, const std::string& endpoint, const Status& st) {
  std::lock_guard<std::mutex> lock(mu_);
  StageState& s = stages_[k];
  if (s.endpoint != endpoint) s.replaced.push_back(std::exchange(s.endpoint, endpoint));
  s.status = st;
}

// ---- events -----------------------------------------------------------------------

void CoordinatorImpl::OnDead(size_t k, const Status& dead) {
  std::vector<RecoveryAction> actions;
  recovery_.OnDead(k, dead, Clock::now(), &actions);
  Carry(std::move(actions));
}

bool CoordinatorImpl::OnRecoveryMessage(size_t k, const wire::Message& m) {
  std::vector<RecoveryAction> actions;
  const bool taken = recovery_.OnMessage(k, m, Clock::now(), &actions);
  Carry(std::move(actions));
  return taken;
}

void CoordinatorImpl::CheckRecovery(Clock::time_point now) {
  std::vector<RecoveryAction> actions;
  for (size_t k = 0; k < links_.size() && recovery_.recovering(); ++k) {
    if (links_[k].refused.ok()) continue;
    recovery_.OnLinkRefused(k, links_[k].refused.WithContext(Describe(k)), now, &actions);
    Carry(std::exchange(actions, {}));
  }
  recovery_.OnTick(now, &actions);
  Carry(std::move(actions));
}

// ---- actions ----------------------------------------------------------------------

void CoordinatorImpl::Carry(std::vector<RecoveryAction> actions) {
  size_t i = 0;
  while (i < actions.size()) {
    const Status sent = CarryOut(actions[i]);
    if (sent.ok()) {
      ++i;
      continue;
    }
    std::vector<RecoveryAction> instead;
    recovery_.OnAssignNotSent(actions[i].stage, sent, Clock::now(), &instead);
    actions = std::move(instead);
    i = 0;
  }
}

Status CoordinatorImpl::CarryOut(const RecoveryAction& a) {
  using Kind = RecoveryAction::Kind;
  switch (a.kind) {
    case Kind::kMarkStage:
      SetStage(a.stage, a.endpoint, a.status);
      return Status::Ok();
    case Kind::kBeginRecovery:
      // The epoch moves before anything fails, so a session that sees its
      // step fail also sees that it must rebuild.
      epoch_.fetch_add(1);
      {
        std::lock_guard<std::mutex> lock(mu_);
        recovering_ = true;
      }
      replies_.FailAll(a.status);
      return Status::Ok();
    case Kind::kAssignSpare: {
      Result<Link> link = MakeLink(a.endpoint, a.key);
      if (!link.ok()) return link.status().WithContext("the spare " + a.endpoint);
      // The dead worker's link goes at once (no linger): a worker restarted
      // on that address must meet only the new link under our identity.
      links_[a.stage].client.socket().set(zmq::sockopt::linger, 0);
      links_[a.stage].monitor.Stop();
      links_[a.stage] = std::move(link).value();
      return SendTo(a.stage, wire::MarshalMessage(MakeAssign(a.stage)));
    }
    case Kind::kRewire:
      return SendTo(a.stage, wire::MarshalMessage(MakeAssign(a.stage)));
    case Kind::kRecovered:
      replies_.ClearSticky();  // errors of sessions from before: each rebuilds under a new id
      for (const wire::Frame& f : deferred_) (void)SendTo(0, f);
      deferred_.clear();
      {
        std::lock_guard<std::mutex> lock(mu_);
        recovering_ = false;
        ++recoveries_;
      }
      recovered_.notify_all();
      return Status::Ok();
    case Kind::kFail:
      {
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = a.status;
        recovering_ = false;
      }
      recovered_.notify_all();
      deferred_.clear();
      replies_.FailAll(a.status);
      return Status::Ok();
    case Kind::kLog:
      Log(a.text);
      return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace lockstep
