// Prompt-lookup proposals for speculative decoding (engine/speculative.h):
// no second model, only the text so far. The longest suffix of the
// history (prompt and tokens chosen so far) of at most max_ngram tokens
// that also occurs earlier is found at its most recent earlier occurrence,
// and the tokens that followed it there are proposed, copied forward as
// an overlapping copy (a cycle shorter than the proposal repeats). A
// proposal is only a guess: the model's own choice at each row decides
// what is kept, so proposals change speed, never bits.
// Stateless; thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace lockstep {

// Replaces *out with up to max_tokens proposed tokens (none when no suffix
// of 1..max_ngram tokens occurs earlier in history).
void ProposeByLookup(std::span<const uint32_t> history, size_t max_tokens, size_t max_ngram,
                     std::vector<uint32_t>* out);

}  // namespace lockstep
