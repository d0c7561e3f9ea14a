#include "worker/step_rules.h"

#include "base/limits.h"

namespace lockstep::step_rules {

Status CheckPosition(uint32_t cache_size, uint32_t first_position, size_t n,
                     uint32_t max_positions) {
  if (first_position != cache_size) {
    return InvalidError("first_position " + std::to_string(first_position) +
                        " does not follow this stage's cache of " + std::to_string(cache_size) +
                        " entries");
  }
  return CheckPositions(uint64_t{first_position} + n, max_positions, [&] {
    return "a step of " + std::to_string(n) + " token(s) at position " +
           std::to_string(first_position);
  });
}

Status CheckRelay(const RelayState& r, const wire::TokenInput& m, uint32_t max_positions) {
  if (m.relayed) {
    if (m.token_ids.size() != 1) {
      return InvalidError(StepName(m) + ": a relayed step feeds one token, not " +
                          std::to_string(m.token_ids.size()));
    }
    if (r.left == 0) {
      return InvalidError(StepName(m) + ": relayed by the last stage, but the session has no "
                                        "relayed step to come");
    }
    if (m.step != r.next_step || uint64_t{RelayOf(m)} + 1 != r.left) {
      return InvalidError(StepName(m) + " relayed with " + std::to_string(RelayOf(m)) +
                          " to follow, but the session expects step " +
                          std::to_string(r.next_step) + " with " + std::to_string(r.left - 1) +
                          " to follow");
    }
    return Status::Ok();
  }
  if (r.left > 0) {
    return InvalidError(StepName(m) + ": a step from the coordinator while " +
                        std::to_string(r.left) +
                        " relayed step(s) of the session are still to come");
  }
  const uint32_t relay = RelayOf(m);
  const uint64_t reach = uint64_t{m.first_position} + m.token_ids.size() + relay;
  if (relay == 0) return Status::Ok();
  return CheckPositions(reach, max_positions, [&] {
    return StepName(m) + " with " + std::to_string(relay) + " relayed after it";
  });
}

Status CheckNotRelaying(uint64_t session, const RelayState& r, const char* what) {
  if (r.left == 0) return Status::Ok();
  return InvalidError(std::string(what) + " of session " + std::to_string(session) + " while " +
                      std::to_string(r.left) + " relayed step(s) of it are still to come");
}

Status CheckKvBudget(uint64_t per_entry, uint64_t held, uint64_t entries, uint64_t budget,
                     const std::function<std::string()>& what) {
  if (per_entry == 0 || budget / per_entry >= held + entries) return Status::Ok();
  const uint64_t total = held + entries;
  const uint64_t asked = total > UINT64_MAX / per_entry ? UINT64_MAX : total * per_entry;
  return OverLimit(ErrorKind::kOverloaded, "kv_bytes_per_worker", what(), asked, budget);
}

}  // namespace lockstep::step_rules
