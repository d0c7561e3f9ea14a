// Admission: what a worker checks of a message before any work, beyond
// who its sender is (PeerPolicy): an Assign's shape and links, and the
// request limits (base/limits.h). Pure functions of the message and what
// the caller passes in; every refusal names what is wrong. The worker's
// I/O thread applies them (worker.h, "Trust"). Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <string>

#include "base/limits.h"
#include "base/status.h"
#include "wire/messages.h"

namespace lockstep::admission {

// Ok when a link to the `what` ("next stage") at `endpoint` can be made:
// a valid connect endpoint, and a key to pin unless the links are
// plaintext (`insecure`) or the endpoint is inproc.
Status CheckLink(const std::string& endpoint, const std::string& key, const std::string& what,
                 bool insecure);

// Ok, or why Assign `a` is refused: an empty layer range; a next hop on
// the last stage or none on another; a next hop that is this worker
// (`self`, its bound endpoint) under any name; a ring hop anywhere but on
// the last of two or more stages, or one that is this worker; a link that
// CheckLink refuses.
Status CheckAssign(const wire::Assign& a, const std::string& self, bool insecure);

// Ok, or why `m` breaks a request limit: a TokenInput of more than
// max_prompt_tokens tokens; a SessionOpen or Fork of a session not yet
// open (`already_open`) when `open_sessions` are open and one more would
// pass sessions_per_worker or sessions_per_coordinator (Overloaded).
Status CheckLimits(const wire::Message& m, const Limits& limits, size_t open_sessions,
                   bool already_open);

}  // namespace lockstep::admission
