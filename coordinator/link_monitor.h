// LinkMonitor: watches one coordinator link (a ZeroMQ socket monitor on its
// DEALER) so that a worker refusing this coordinator's key, or a worker
// whose key is not the one pinned for it, is reported as exactly that, at
// once, instead of as a worker that never answers; and so that a
// connection that closes (the worker process exited, or the link dropped
// and with it whatever frames were queued) is noticed at once, even when a
// new process on the same address answers heartbeats.
// ZMQ retries a failed handshake on every reconnect; each failure is an
// event, Check() drains them.
//
// Stop() must be called before the monitored socket closes (libzmq keeps
// the monitor bound to it otherwise). Thread-compatible: owned by whichever
// thread owns the link's socket.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include <zmq.hpp>

#include "base/status.h"

namespace lockstep {

class LinkMonitor {
 public:
  // Monitors `socket` (connected to `endpoint`, pinning the CURVE key
  // `pinned`, "" for none) for failed handshakes.
  static Result<LinkMonitor> Attach(zmq::context_t& context, zmq::socket_ref socket,
                                    const std::string& endpoint, const std::string& pinned = "");
  LinkMonitor(LinkMonitor&& other) noexcept;
  LinkMonitor& operator=(LinkMonitor&& other) noexcept;
  // Ends the monitoring; idempotent. Call before closing the socket.
  void Stop();

  // Ok, or the first handshake failure seen since the last call: Invalid
  // "… refused this coordinator's key (…, ZAP status 400) …" when the
  // worker's allow-list does not hold it; Mismatch "… is not the key
  // pinned for it …" when the worker closed the connection in two
  // handshakes in a row without one completing (a CURVE server cannot read
  // a client's hello sealed for another key, and closes: what a wrongly
  // pinned key looks like from this side); Invalid naming a failed CURVE
  // handshake (a protocol error) otherwise. Never blocks.
  Status Check();
  // Whether the connection closed since the last call (drained by Check).
  bool TakeDisconnected() { return std::exchange(disconnected_, false); }

 private:
  LinkMonitor(zmq::socket_t pair, void* monitored, std::string pinned)
      : pair_(std::move(pair)), monitored_(monitored), pinned_(std::move(pinned)) {}
  zmq::socket_t pair_;        // the monitor's events
  void* monitored_ = nullptr;  // the socket watched, until Stop
  std::string pinned_;         // the key pinned for the worker ("" = none)
  bool disconnected_ = false;
  int closed_handshakes_ = 0;  // in a row, since the last one that completed
};

}  // namespace lockstep
