// Limits: the bounds every request is checked against BEFORE any work or
// allocation, so that no peer or caller can make a process allocate or
// compute without bound. Over a limit, the request is refused with a
// Status naming the limit (by the field name below), the value asked for
// and the bound; nothing else changes.
//
//   kind Invalid     a request that can never fit (positions, prompt, frame)
//   kind Overloaded  capacity in use right now (sessions, KV memory);
//                    retrying later may succeed
//
// Positions are bounded by the model itself (max_position_embeddings in
// config.json); `max_positions` can only lower that bound.
// Plain data and stateless functions; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace lockstep {

struct Limits {
  uint32_t max_positions = 0;           // per session; 0 = the model's bound only
  uint32_t max_prompt_tokens = 8192;    // tokens in one prefill
  uint32_t sessions_per_coordinator = 64;   // held by one coordinator on a worker
  uint32_t sessions_per_worker = 256;       // held by all coordinators on a worker
  uint64_t kv_bytes_per_worker = uint64_t{4} << 30;  // KV cache memory budget
  uint64_t weight_bytes_per_worker = 0;  // a stage's weights (as stored); 0: no budget
  size_t frame_bytes = size_t{64} << 20;  // one message on the wire
};

// The bound on positions for a model whose max_position_embeddings is
// `model_max` (<= 0 in a config means "not given": only the limit applies).
uint32_t MaxPositions(const Limits& limits, int model_max);

// "NAME: WHAT asks for VALUE, over the limit of LIMIT" with `kind`.
Status OverLimit(ErrorKind kind, const std::string& name, const std::string& what,
                 uint64_t value, uint64_t limit);

// Ok when value <= limit, else OverLimit(kind, ...).
Status CheckLimit(ErrorKind kind, const std::string& name, const std::string& what,
                  uint64_t value, uint64_t limit);

// The one refusal of positions past the bound, wherever they are checked
// (a request before it runs, a stage before a step, a relay): Invalid
// "limit max_positions: WHAT asks for REACH, over the limit of BOUND
// positions (the model's max_position_embeddings, or a lower max_positions)".
Status PositionsOverLimit(const std::string& what, uint64_t reach, uint32_t bound);

// Ok when `bound` is 0 (none known) or reach <= bound; else
// PositionsOverLimit(what(), ...), `what` called only then (no string is
// built on a step that fits).
template <typename What>
Status CheckPositions(uint64_t reach, uint32_t bound, const What& what) {
  if (bound == 0 || reach <= bound) return Status::Ok();
  return PositionsOverLimit(what(), reach, bound);
}

}  // namespace lockstep
