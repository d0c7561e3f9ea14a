// Peer liveness in the Paranoid Pirate style (ZeroMQ guide, ch. 4): every
// message received from a peer -- heartbeat or not -- proves it alive; a
// peer silent for `liveness` consecutive heartbeat intervals is dead. Each
// side sends a Heartbeat when it has sent nothing for one interval.
//
// Pure bookkeeping: callers pass the current time, so tests need no sleeps
// for the arithmetic and the owning poll loop stays in charge of sockets.
// Use TimeUntilNextEvent() as the poll timeout so deadlines are met.
// Thread-compatible; owned by the thread that owns the socket.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace lockstep::wire {

struct HeartbeatOptions {
  std::chrono::milliseconds interval{1000};  // heartbeat period
  int liveness = 3;                          // missed intervals before death
};

class PeerLiveness {
 public:
  using Clock = std::chrono::steady_clock;

  // REQUIRES: options.interval > 0, options.liveness > 0.
  PeerLiveness(const HeartbeatOptions& options, Clock::time_point now);

  void OnReceived(Clock::time_point now) { last_received_ = now; }
  void OnSent(Clock::time_point now) { last_sent_ = now; }

  // True once nothing arrived for interval * liveness.
  bool IsDead(Clock::time_point now) const { return now >= DeathTime(); }
  // True when nothing was sent for one interval.
  bool HeartbeatDue(Clock::time_point now) const {
    return now >= last_sent_ + options_.interval;
  }
  // Sequence number for the next Heartbeat message (1, 2, ...).
  uint64_t NextSequence() { return ++sequence_; }

  Clock::time_point DeathTime() const {
    return last_received_ + options_.interval * options_.liveness;
  }
  // Time until the next heartbeat is due or the peer would be declared dead,
  // whichever is sooner; zero if already due.
  std::chrono::milliseconds TimeUntilNextEvent(Clock::time_point now) const;

 private:
  HeartbeatOptions options_;
  Clock::time_point last_received_;
  Clock::time_point last_sent_;
  uint64_t sequence_ = 0;
};

// PeerLiveness for every peer of a ROUTER, keyed by identity.
class LivenessTable {
 public:
  using Clock = PeerLiveness::Clock;

  explicit LivenessTable(const HeartbeatOptions& options) : options_(options) {}

  // Starts tracking `peer` if new; any message resets its liveness.
  void OnReceived(const std::string& peer, Clock::time_point now);
  void OnSent(const std::string& peer, Clock::time_point now);
  void Forget(const std::string& peer) { peers_.erase(peer); }

  // Removes and returns the peers found dead at `now`.
  std::vector<std::string> ReapDead(Clock::time_point now);
  // Peers owed a heartbeat at `now`.
  std::vector<std::string> HeartbeatsDue(Clock::time_point now) const;
  // Poll timeout that wakes the owner in time for the earliest event;
  // `idle` when no peer is tracked.
  std::chrono::milliseconds TimeUntilNextEvent(Clock::time_point now,
                                               std::chrono::milliseconds idle) const;
  // nullptr if `peer` is not tracked.
  PeerLiveness* Find(const std::string& peer);
  size_t size() const { return peers_.size(); }

 private:
  HeartbeatOptions options_;
  std::map<std::string, PeerLiveness> peers_;
};

}  // namespace lockstep::wire
