// Endpoint syntax, checked before any socket binds or connects, so that a
// typo is an error instead of a surprise (libzmq would, e.g., bind
// tcp://127.0.0.1:99999 to port 34463).
//
//   tcp://HOST:PORT   HOST non-empty (name, IPv4, [IPv6] or * to bind all);
//                     PORT a decimal 1..65535, or * / 0 for an ephemeral
//                     port (binding only).
//   ipc://PATH        PATH non-empty.
//   inproc://NAME     NAME non-empty (same process, same zmq context).
//
// Stateless; thread-safe.
#pragma once

#include <string>

#include "base/status.h"

namespace lockstep::wire {

enum class EndpointUse { kBind, kConnect };

// Invalid naming the endpoint and what is wrong with it.
Status ValidateEndpoint(const std::string& endpoint, EndpointUse use);

// True for inproc:// endpoints (no network, no CURVE).
bool IsInprocEndpoint(const std::string& endpoint);

}  // namespace lockstep::wire
