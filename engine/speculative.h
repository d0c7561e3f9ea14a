// Exact speculative decoding: RunDecode's result (tokens, every step's
// logits sha256, the witness chain, the trace) with fewer weight passes.
// Each step proposes up to max_proposals tokens by prompt lookup
// (engine/proposer.h) and feeds the step's token and the proposals as one
// multi-row step (StepBackend::FeedRows): row i is step s+i, chosen as
// plain decoding chooses it (greedy or the seeded sampler at that step),
// and the proposals are kept while each equals the model's own choice at
// the row before; the rows after the first difference are evicted (a tail
// span: the cache is then the one plain decoding has). A run never crosses
// a step with evictions scheduled after it, nor the last step, so the KV
// state every row sees and the largest cache length are plain decoding's.
//
// Proposals adapt: a pass proposes at most a budget of tokens (2 at
// first), doubled up to max_proposals after a pass that kept them all,
// cut to one past the kept run after a pass that kept some. After a pass
// whose proposals were all rejected the next `backoff` steps run plain (one
// FeedAndChoose), backoff doubling up to kMaxBackoff while rejections go on
// and resetting when a proposal is kept; a step with no proposal is a
// plain step. So a workload the proposer cannot guess costs about what
// plain decoding does.
// Thread-compatible, as the backend.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "engine/decode.h"
#include "engine/witness.h"

namespace lockstep {

struct SpeculativeOptions {
  uint32_t max_proposals = 6;  // tokens proposed per step (rows = 1 + proposals)
  uint32_t max_ngram = 3;      // longest history suffix looked up
};

struct SpeculativeStats {
  uint64_t proposed = 0;  // proposal tokens fed
  uint64_t accepted = 0;  // of them, kept (each saved one weight pass)
  uint64_t passes = 0;    // multi-row steps run
};

inline constexpr uint32_t kMaxBackoff = 64;

// REQUIRES: a fresh backend. Invalid as ValidateDecodeRequest.
Result<DecodeResult> RunSpeculativeDecode(StepBackend& backend, const DecodeRequest& req,
                                          const WitnessSeed& seed, const SpeculativeOptions& o,
                                          SpeculativeStats* stats = nullptr);

}  // namespace lockstep
