#include "engine/proposer.h"

#include <algorithm>

namespace lockstep {
namespace {

// The start of the most recent occurrence of history's last n tokens that
// ends before the history does; size() when there is none.
size_t LastEarlierOccurrence(std::span<const uint32_t> history, size_t n) {
  const size_t size = history.size();
  const auto suffix = history.last(n);
  for (size_t i = size - n; i-- > 0;) {
    if (std::equal(suffix.begin(), suffix.end(), history.begin() + static_cast<ptrdiff_t>(i))) return i;
  }
  return size;
}

}  // namespace

void ProposeByLookup(std::span<const uint32_t> history, size_t max_tokens, size_t max_ngram,
                     std::vector<uint32_t>* out) {
  out->clear();
  const size_t size = history.size();
  for (size_t n = std::min(max_ngram, size > 0 ? size - 1 : 0); n >= 1 && max_tokens > 0; --n) {
    const size_t at = LastEarlierOccurrence(history, n);
    if (at == size) continue;
    for (size_t j = 0; j < max_tokens; ++j) {  // overlapping copy from after the occurrence
      const size_t src = at + n + j;
      out->push_back(src < size ? history[src] : (*out)[src - size]);
    }
    return;
  }
}

}  // namespace lockstep
