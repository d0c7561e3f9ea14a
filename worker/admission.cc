#include "worker/admission.h"

#include <algorithm>
#include <variant>

#include "wire/endpoint.h"
#include "wire/self_endpoint.h"

namespace lockstep::admission {

Status CheckLink(const std::string& endpoint, const std::string& key, const std::string& what,
                 bool insecure) {
  Status st = wire::ValidateEndpoint(endpoint, wire::EndpointUse::kConnect);
  if (st.ok() && key.empty() && !insecure && !wire::IsInprocEndpoint(endpoint)) {
    st = InvalidError("the assignment names no CURVE key for the " + what);
  }
  return st.WithContext(what + " " + endpoint);
}

Status CheckAssign(const wire::Assign& a, const std::string& self, bool insecure) {
  if (a.layer_lo >= a.layer_hi) {
    return InvalidError("assignment refused: empty layer range [" + std::to_string(a.layer_lo) +
                        "," + std::to_string(a.layer_hi) + ")");
  }
  if (a.is_last != a.next_hop.empty()) {
    return InvalidError("assignment refused: the last stage has no next hop and every other "
                        "stage has one");
  }
  if (!a.next_hop.empty() && wire::ReachesListener(a.next_hop, self)) {
    return InvalidError("assignment refused: its next hop " + a.next_hop +
                        " is this worker itself (a forwarding loop)");
  }
  const bool loop = !a.ring_hop.empty() && wire::ReachesListener(a.ring_hop, self);
  if (!a.ring_hop.empty() && (!a.is_last || a.is_first || loop)) {
    return InvalidError("assignment refused: only the last of two or more stages relays to "
                        "the first (ring hop " + a.ring_hop + ")");
  }
  // Links are checked now, not when first used: a refused Assign gets its
  // error and nothing else (no Hello, no AssignAck).
  if (!a.next_hop.empty()) {
    LOCKSTEP_RETURN_IF_ERROR(CheckLink(a.next_hop, a.next_hop_key, "next stage", insecure)
                                 .WithContext("assignment refused"));
  }
  if (!a.ring_hop.empty()) {
    return CheckLink(a.ring_hop, a.ring_hop_key, "first stage", insecure)
        .WithContext("assignment refused");
  }
  return Status::Ok();
}

Status CheckLimits(const wire::Message& m, const Limits& l, size_t open_sessions,
                   bool already_open) {
  if (const auto* t = std::get_if<wire::TokenInput>(&m)) {
    return CheckLimit(ErrorKind::kInvalid, "max_prompt_tokens",
                      "session " + std::to_string(t->session_id) + " step " + std::to_string(t->step),
                      t->token_ids.size(), l.max_prompt_tokens);
  }
  const bool opens = std::holds_alternative<wire::SessionOpen>(m) ||
                     std::holds_alternative<wire::Fork>(m);
  if (!opens || already_open) return Status::Ok();
  const uint64_t limit = std::min<uint64_t>(l.sessions_per_worker, l.sessions_per_coordinator);
  return CheckLimit(ErrorKind::kOverloaded,
                    l.sessions_per_worker <= l.sessions_per_coordinator ? "sessions_per_worker"
                                                                        : "sessions_per_coordinator",
                    "a new session", open_sessions + 1, limit);
}

}  // namespace lockstep::admission
