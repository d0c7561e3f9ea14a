// TeacherForce: recomputes a decode whose tokens are known (a receipt's)
// by teacher forcing. Each run of steps with no eviction in between is one
// multi-row step (StepBackend::FeedRows, engine/row_step.h): the prompt or
// the previous step's claimed token, then the claimed tokens of every step
// of the run but its last, each row giving one step's logits, token and
// chain fold; the evictions scheduled after the run's last step are
// applied before the next run, so every row sees the KV state the
// producer had. Because a row of a multi-row step equals the same token
// fed alone, the result equals RunDecode's on the same request whenever
// the claimed tokens are the model's own, at prefill speed instead of one
// weight pass per token.
//
// The first step whose chosen token differs from the claimed one ends the
// recomputation (later rows would be fed tokens the model did not choose):
// the result then holds the steps up to and including that one, so a
// comparison with the claims (receipt::FirstDivergence) names the same
// first differing step as a decode replay would. Claimed ids >= vocab are
// never fed (the step that claims one is the last computed).
// Thread-compatible, as the backend.
#pragma once

#include <cstdint>
#include <span>

#include "base/status.h"
#include "engine/decode.h"
#include "engine/witness.h"

namespace lockstep {

// REQUIRES: a fresh backend (CacheLength() 0). Invalid as
// ValidateDecodeRequest, or when claimed does not hold req.gen tokens.
Result<DecodeResult> TeacherForce(StepBackend& backend, const DecodeRequest& req,
                                  std::span<const uint32_t> claimed, uint32_t vocab,
                                  const WitnessSeed& seed);

}  // namespace lockstep
