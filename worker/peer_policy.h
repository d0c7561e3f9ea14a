// PeerPolicy: who a worker's peers are and what each may send it
// (docs/deployment.md, "Keys and allow-lists"). The worker's I/O thread
// asks it, for every frame, which role the sender has and whether the
// message is admitted. It owns no socket: whether the holder's connection
// is still up is found out by the caller and passed in.
//
// Roles:
//  * holder: the connection whose Assign was accepted (its ROUTER identity,
//    and its CURVE key when the link has one). It alone may send token
//    inputs that are not relayed, Shutdown, and the next Assign.
//  * upstream: the previous stage, which forwards the holder's session
//    traffic (SessionOpen, Fork, Evict, Release) and sends hidden frames.
//  * ring: the last stage, which sends the first stage relayed steps and
//    nothing else.
//  * stranger: everyone else; anything but a heartbeat is refused, to it
//    alone.
// With keys, upstream and ring are the CURVE keys the holder's Assign
// named. Without (plaintext `--insecure` links, inproc) no peer can be
// authenticated, so each is bound to a connection instead: the first
// connection to send a later stage session traffic after an Assign is its
// upstream, the first to send the first stage a relayed step its last
// stage, until the next Assign; every other connection is a stranger.
// So every session belongs to the one connection that may open it (on the
// first stage the holder, on a later one its upstream): no other peer may
// step, evict, fork or release it, and its refusals never reach the owner.
//
// Holding: another connection's Assign is refused (Overloaded, saying how
// long the worker has been held and when the holder last spoke) while the
// holder is alive: its connection is up and it spoke within orphan_after.
// A second coordinator run on the holder's own config presents the
// holder's key and is refused all the same. Once the holder is gone, the
// next Assign takes the worker and the previous holder's sessions go.
//
// Thread-compatible: the worker's I/O thread owns it. Times are the
// caller's (steady clock).
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/status.h"
#include "wire/messages.h"

namespace lockstep {

// A peer of the worker's ROUTER, as one frame names it (views into the
// frame's Incoming: valid while it is).
struct PeerId {
  std::string_view id;   // its ROUTER identity (one per connection)
  std::string_view key;  // its authenticated CURVE key; "" on plaintext/inproc links
};

enum class PeerRole { kHolder, kUpstream, kRing, kStranger };

class PeerPolicy {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PeerPolicy(std::chrono::milliseconds orphan_after) : orphan_after_(orphan_after) {}

  // Whether some connection holds the worker, and which.
  bool held() const { return !holder_id_.empty(); }
  const std::string& holder_id() const { return holder_id_; }

  // The role `p` has for `m` (null: a frame that did not parse, for which
  // only a role already established counts).
  PeerRole RoleOf(const PeerId& p, const wire::Message* m) const;
  // Ok, or why `m` (anything but an Assign) from `p` in `role` is refused.
  Status Admit(const PeerId& p, PeerRole role, const wire::Message& m) const;

  // Whether AdmitAssign needs to know if the holder's connection is up:
  // `p` is not the holder, and the holder has not been silent too long.
  bool MustProbeHolder(const PeerId& p, Clock::time_point now) const;
  // Ok, or why an Assign from `p` is refused (another holder is alive).
  // holder_connected: a frame to the holder could still be delivered.
  Status AdmitAssign(const PeerId& p, bool holder_connected, Clock::time_point now) const;
  // An admitted Assign `a` from `p`: `p` holds the worker from now on, with
  // the upstream and ring `a` names. True when it took the worker from
  // another holder, whose sessions must go.
  bool Assigned(const PeerId& p, const wire::Assign& a, Clock::time_point now);
  // `m` from `p` in `role` was admitted: a keyless upstream or ring is
  // bound to this connection until the next Assign.
  void Admitted(const PeerId& p, PeerRole role);

  // The holder spoke.
  void Heard(Clock::time_point now);
  // True once when the holder has been silent for orphan_after: it is
  // gone, and its sessions must go.
  bool TakeOrphaned(Clock::time_point now);

 private:
  bool IsHolder(const PeerId& p) const {
    return held() && p.id == holder_id_ && p.key == holder_key_;
  }
  bool Silent(Clock::time_point now) const { return orphaned_ || now - heard_ >= orphan_after_; }

  std::chrono::milliseconds orphan_after_;
  std::string holder_id_, holder_key_;  // "" id: nobody holds the worker
  Clock::time_point held_since_;  // the holder's first accepted Assign
  Clock::time_point heard_;       // the holder's last frame
  bool orphaned_ = false;
  bool first_ = false, last_ = false;  // the stage the last Assign named
  std::string upstream_key_, ring_key_;  // the keys it named ("" = none)
  std::string upstream_id_, ring_id_;    // keyless: the connections bound to them
};

}  // namespace lockstep
