#include "wire/liveness.h"

#include <algorithm>
#include <cassert>

namespace lockstep::wire {

using std::chrono::milliseconds;

PeerLiveness::PeerLiveness(const HeartbeatOptions& options, Clock::time_point now)
    : options_(options), last_received_(now), last_sent_(now) {
  assert(options.interval.count() > 0 && options.liveness > 0);
}

milliseconds PeerLiveness::TimeUntilNextEvent(Clock::time_point now) const {
  const auto next = std::min(DeathTime(), last_sent_ + options_.interval);
  if (next <= now) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(next - now);
}

void LivenessTable::OnReceived(const std::string& peer, Clock::time_point now) {
  auto it = peers_.try_emplace(peer, options_, now).first;
  it->second.OnReceived(now);
}

void LivenessTable::OnSent(const std::string& peer, Clock::time_point now) {
  if (PeerLiveness* p = Find(peer)) p->OnSent(now);
}

std::vector<std::string> LivenessTable::ReapDead(Clock::time_point now) {
  std::vector<std::string> dead;
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (it->second.IsDead(now)) {
      dead.push_back(it->first);
      it = peers_.erase(it);
    } else {
      ++it;
    }
  }
  return dead;
}

std::vector<std::string> LivenessTable::HeartbeatsDue(Clock::time_point now) const {
  std::vector<std::string> due;
  for (const auto& [peer, liveness] : peers_) {
    if (liveness.HeartbeatDue(now)) due.push_back(peer);
  }
  return due;
}

milliseconds LivenessTable::TimeUntilNextEvent(Clock::time_point now,
                                               milliseconds idle) const {
  milliseconds next = idle;
  for (const auto& [peer, liveness] : peers_) {
    next = std::min(next, liveness.TimeUntilNextEvent(now));
  }
  return next;
}

PeerLiveness* LivenessTable::Find(const std::string& peer) {
  auto it = peers_.find(peer);
  return it == peers_.end() ? nullptr : &it->second;
}

}  // namespace lockstep::wire
