// Where speculative decoding's proposals come from (engine/speculative.h):
// a ProposalSource guesses the tokens that follow a history (prompt and
// tokens chosen so far). A guess only changes speed: the target model's
// own choice at each row decides what is kept, so no source changes a bit
// of the result. Two sources exist: prompt lookup (LookupProposals, here:
// no second model) and a draft model (engine/draft_proposals.h).
// Thread-compatible: one source per session.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"

namespace lockstep {

class ProposalSource {
 public:
  virtual ~ProposalSource() = default;
  // Replaces *out with at most max_tokens tokens guessed to follow
  // `history` (none: no guess). Each call's history extends or rewrites
  // the previous call's; the source keeps no promise about past guesses.
  virtual Status Propose(std::span<const uint32_t> history, size_t max_tokens,
                         std::vector<uint32_t>* out) = 0;
};

// Prompt lookup (engine/proposer.h): what followed the most recent earlier
// occurrence of the longest history suffix of at most max_ngram tokens.
class LookupProposals final : public ProposalSource {
 public:
  explicit LookupProposals(size_t max_ngram) : max_ngram_(max_ngram) {}
  Status Propose(std::span<const uint32_t> history, size_t max_tokens,
                 std::vector<uint32_t>* out) override;

 private:
  size_t max_ngram_;
};

}  // namespace lockstep
