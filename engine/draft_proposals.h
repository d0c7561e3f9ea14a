// Draft-model proposals for speculative decoding: a smaller model with the
// target's tokenizer (engine/same_tokenizer.h checks it) guesses the next
// tokens by greedy decoding on the same history. The draft keeps its own
// KV cache (a LocalBackend on its own whole-model Stage) holding a prefix
// of the history and, after a call, the guesses it fed. Each call rolls
// that cache back to the longest prefix it shares with the new history (a
// tail eviction, which equals never having fed the rest), catches up on
// the tokens it has not seen in one multi-row feed, and then decodes
// greedily (ops::ArgmaxFirst) up to max_tokens guesses. A history that
// reaches the draft's max positions gets no guess (plain steps), and
// guesses stop where the draft's cache would outgrow them.
// The draft's bits never reach the result: only the target's choice at
// each row decides what is kept. `stage` must outlive the source.
// Thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/local_backend.h"
#include "engine/proposal_source.h"
#include "engine/stage.h"

namespace lockstep {

class DraftProposals final : public ProposalSource {
 public:
  // REQUIRES: stage.spec() is first and last. max_positions: the positions
  // the draft supports (MaxPositions of its config; 0: no bound known).
  // reserve_positions: cache entries reserved up front.
  DraftProposals(const Stage& stage, uint32_t max_positions, size_t reserve_positions = 0);

  Status Propose(std::span<const uint32_t> history, size_t max_tokens,
                 std::vector<uint32_t>* out) override;

  // The tokens the draft's cache holds, in order (for tests).
  std::span<const uint32_t> cached() const { return cached_; }

 private:
  // Evicts the cache's tail past its longest common prefix with history,
  // keeping at most history.size() - 1 tokens (the last one is fed again
  // for its logits).
  Status RollBackTo(std::span<const uint32_t> history);

  LocalBackend backend_;
  uint32_t max_positions_;
  std::vector<uint32_t> cached_;
  std::vector<float> logits_;
};

}  // namespace lockstep
