// How the rows of a multi-row step are cut into passes over the weights.
// A pass computes its rows together, so it reads each weight once for all
// of them, and holds their logits ([rows][vocab]) until they are chosen:
// at most kRowsPerPass rows, which bounds that memory whatever the step's
// length. The passes are as even as their number allows (272 rows: five of
// 54-55, not four of 64 and one of 16), as a short pass re-reads every
// weight for few rows. Stateless.
#pragma once

#include <algorithm>
#include <cstddef>

namespace lockstep {

// 64: on the SmolLM2-135M shape (2 threads) a 64-row pass computed its
// layers 12 % and its logits 18 % faster a row than a 32-row pass
// (docs/performance.md, "Verify").
inline constexpr size_t kRowsPerPass = 64;

// The end of the pass that starts at row `at` of an n-row step (at < n, at
// a pass boundary: 0 or an earlier PassEnd).
inline size_t PassEnd(size_t at, size_t n) {
  const size_t passes = (n + kRowsPerPass - 1) / kRowsPerPass;
  const size_t base = n / passes, longer = n % passes;  // the first `longer` take base + 1
  size_t end = 0;
  for (size_t i = 0; end <= at; ++i) end += base + (i < longer ? 1 : 0);
  return std::min(end, n);
}

}  // namespace lockstep
