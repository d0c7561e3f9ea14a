#include "worker/peer_policy.h"

#include <cstdio>
#include <variant>

#include "wire/link_security.h"

namespace lockstep {
namespace {

using std::chrono::milliseconds;

// What the previous stage sends a later one: the holder's session traffic.
bool IsUpstreamTraffic(const wire::Message& m) {
  return std::holds_alternative<wire::SessionOpen>(m) || std::holds_alternative<wire::Fork>(m) ||
         std::holds_alternative<wire::Evict>(m) || std::holds_alternative<wire::Release>(m) ||
         std::holds_alternative<wire::HiddenFrame>(m);
}

bool IsRelayedStep(const wire::Message& m) {
  const auto* t = std::get_if<wire::TokenInput>(&m);
  return t != nullptr && t->relayed;
}

std::string Ago(PeerPolicy::Clock::duration d) {
  const auto ms = std::chrono::duration_cast<milliseconds>(d).count();
  if (ms < 10000) return std::to_string(ms) + " ms";
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f s", static_cast<double>(ms) / 1000.0);
  return text;
}

}  // namespace

PeerRole PeerPolicy::RoleOf(const PeerId& p, const wire::Message* m) const {
  if (!held()) return PeerRole::kStranger;
  if (IsHolder(p)) return PeerRole::kHolder;
  if (!p.key.empty()) {
    if (p.key == upstream_key_) return PeerRole::kUpstream;
    if (p.key == ring_key_) return PeerRole::kRing;
    return PeerRole::kStranger;
  }
  // No key to authenticate: the connection bound to the role, or the first
  // one to send what that role sends.
  if (!upstream_id_.empty() && p.id == upstream_id_) return PeerRole::kUpstream;
  if (!ring_id_.empty() && p.id == ring_id_) return PeerRole::kRing;
  if (m == nullptr) return PeerRole::kStranger;
  if (!first_ && upstream_id_.empty() && IsUpstreamTraffic(*m)) return PeerRole::kUpstream;
  if (first_ && !last_ && ring_id_.empty() && IsRelayedStep(*m)) return PeerRole::kRing;
  return PeerRole::kStranger;
}

Status PeerPolicy::Admit(const PeerId& p, PeerRole role, const wire::Message& m) const {
  const std::string what = std::string(wire::MessageName(m));
  const bool shutdown = std::holds_alternative<wire::Shutdown>(m);
  if (role == PeerRole::kStranger || (shutdown && role != PeerRole::kHolder)) {
    return InvalidError("refused " + what + " from peer '" + std::string(p.id) +
                        "': only the coordinator holding this worker" +
                        (shutdown ? "" : " or its upstream stage") + " may send it");
  }
  if (std::holds_alternative<wire::HiddenFrame>(m) && role != PeerRole::kUpstream) {
    return InvalidError("refused hidden frame from peer '" + std::string(p.id) +
                        "': only the upstream stage sends them");
  }
  const auto* t = std::get_if<wire::TokenInput>(&m);
  if (role == PeerRole::kRing && (t == nullptr || !t->relayed)) {
    return InvalidError("refused " + what + " from the last stage: it sends the first stage "
                        "only relayed steps");
  }
  if (t != nullptr && t->relayed && role == PeerRole::kHolder) {
    return InvalidError("refused a relayed step from the coordinator: only the last stage "
                        "relays steps");
  }
  if (t != nullptr && !t->relayed && role != PeerRole::kHolder) {
    return InvalidError("refused " + what + " from peer '" + std::string(p.id) +
                        "': only the coordinator holding this worker sends token inputs");
  }
  return Status::Ok();
}

bool PeerPolicy::MustProbeHolder(const PeerId& p, Clock::time_point now) const {
  return held() && !IsHolder(p) && !Silent(now);
}

Status PeerPolicy::AdmitAssign(const PeerId& p, bool holder_connected,
                               Clock::time_point now) const {
  if (!MustProbeHolder(p, now) || !holder_connected) return Status::Ok();
  const std::string key = holder_key_.empty() ? "" : " (key " + wire::KeyLabel(holder_key_) + ")";
  return Status(ErrorKind::kOverloaded,
                "busy: this worker is held by another coordinator" + key + " since " +
                    Ago(now - held_since_) + " ago, which last spoke " + Ago(now - heard_) +
                    " ago; refusing this coordinator's assignment (stop the other one, or "
                    "wait until it has been silent for " + Ago(orphan_after_) + ")");
}

bool PeerPolicy::Assigned(const PeerId& p, const wire::Assign& a, Clock::time_point now) {
  const bool took_over = held() && !IsHolder(p);
  if (!held() || took_over) held_since_ = now;
  holder_id_ = p.id;
  holder_key_ = p.key;
  heard_ = now;
  orphaned_ = false;
  first_ = a.is_first;
  last_ = a.is_last;
  upstream_key_ = a.upstream_key;
  ring_key_ = a.ring_upstream_key;
  upstream_id_.clear();  // a keyless upstream or ring binds again
  ring_id_.clear();
  return took_over;
}

void PeerPolicy::Admitted(const PeerId& p, PeerRole role) {
  if (!p.key.empty()) return;  // authenticated by its key
  if (role == PeerRole::kUpstream && upstream_id_.empty()) upstream_id_ = std::string(p.id);
  if (role == PeerRole::kRing && ring_id_.empty()) ring_id_ = std::string(p.id);
}

void PeerPolicy::Heard(Clock::time_point now) {
  heard_ = now;
  orphaned_ = false;
}

bool PeerPolicy::TakeOrphaned(Clock::time_point now) {
  if (!held() || orphaned_ || now - heard_ < orphan_after_) return false;
  orphaned_ = true;
  return true;
}

}  // namespace lockstep
