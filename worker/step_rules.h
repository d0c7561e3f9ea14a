// Step rules: whether a stage may run a step, as pure functions of the
// session's state and the step, all checked before any work (a stage's
// SessionTable applies them, worker/session_table.h; docs/runtime.md). A
// step's positions follow the session's cache and fit the model; on the
// first stage a relayed step is exactly the one its session expects, the
// coordinator may not step, evict or fork a session while it relays, and a
// relay may not run past the model's positions; the entries a step adds
// fit the worker's KV budget. Every refusal names what is wrong.
// Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "wire/messages.h"

namespace lockstep::step_rules {

// The first stage's relay state of a session: relayed steps still to come
// and the request number the next one carries.
struct RelayState {
  uint32_t left = 0;
  uint32_t next_step = 0;
};

// Steps a TokenInput or HiddenFrame asks the pipeline to relay after it.
template <typename M>
uint32_t RelayOf(const M& m) {
  return m.handoff ? m.handoff->relay : 0;
}

// "session S step T", for errors.
template <typename M>
std::string StepName(const M& m) {
  return "session " + std::to_string(m.session_id) + " step " + std::to_string(m.step);
}

// first_position follows a cache of `cache_size` entries, and positions up
// to first_position + n stay within max_positions (0: no bound).
Status CheckPosition(uint32_t cache_size, uint32_t first_position, size_t n,
                     uint32_t max_positions);

// The first stage's relay rules for TokenInput `m` of a session in state
// `r` (max_positions as above).
Status CheckRelay(const RelayState& r, const wire::TokenInput& m, uint32_t max_positions);

// An Evict or Fork (`what`) of `session` while it relays is refused.
Status CheckNotRelaying(uint64_t session, const RelayState& r, const char* what);

// Ok when `entries` more entries, `held` being held already, fit `budget`
// bytes at `per_entry` bytes each (engine/kv_bytes.h; 0: nothing to
// check); else Overloaded naming the limit and what() (built only then).
Status CheckKvBudget(uint64_t per_entry, uint64_t held, uint64_t entries, uint64_t budget,
                     const std::function<std::string()>& what);

}  // namespace lockstep::step_rules
