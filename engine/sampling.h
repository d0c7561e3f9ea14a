// Choosing the next token from one step's logits: CIS-2 greedy argmax at
// temperature 0, otherwise reproducible sampling (temperature, top-k,
// top-p, seed) defined bit for bit in docs/sampling.md:
//   1. z[i] = logits[i] / temperature (one f32 division);
//   2. m = the largest z (total order over the float bits, lowest id on
//      ties); e[i] = exp_pinned(z[i] - m); candidates are the ids with
//      e > 0, ordered by z descending then id ascending (a unique order);
//      top_k > 0 keeps the first top_k;
//   3. S = sequential sum of e in that order; top_p < 1 keeps the shortest
//      prefix whose running sum reaches top_p * S (at least one);
//   4. u = (SplitMix64 output number step+1 for `seed`) >> 40, times 2^-24:
//      a uniform in [0, 1) that depends only on (seed, step);
//   5. the token is the first kept candidate whose running sum of e
//      exceeds u * (sum of kept e); the last kept one if none does.
// Tokens whose e is 0 (or NaN) are never candidates; the maximum always is.
// Every operation is a pinned, sequential f32 operation, so the same
// logits, params and step give the same token on every machine.
// Thread-compatible: one SamplingScratch per calling thread.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace lockstep {

struct SamplingParams {
  float temperature = 0;  // 0: greedy (CIS-2 §11.2)
  uint32_t top_k = 0;     // 0: no limit
  float top_p = 1;        // 1: no limit
  uint64_t seed = 0;
};

// Reusable buffers so a step does not allocate once they have grown to
// the vocabulary's size.
struct SamplingScratch {
  std::vector<float> z;          // [vocab]: z, then e
  std::vector<uint64_t> order;   // candidates: (~key(z) << 32) | id
  std::vector<uint64_t> spare;   // the sort's second buffer
};

// Invalid (naming the field) unless temperature is 0 or in [1e-3, 100]
// and top_p is in (0, 1].
Status ValidateSamplingParams(const SamplingParams& p);

// The token for decode step `step` (0 = the first generated token).
// temperature 0 returns exactly ops::ArgmaxFirst (scratch unused; may be
// null). REQUIRES: ValidateSamplingParams(p) ok, logits non-empty, and a
// scratch when temperature > 0.
uint32_t ChooseToken(std::span<const float> logits, const SamplingParams& p, uint32_t step,
                     SamplingScratch* scratch);

// Step 4's uniform, exposed for tests and docs: exact multiple of 2^-24.
float SamplingUniform(uint64_t seed, uint32_t step);

}  // namespace lockstep
