// Exact speculative decoding: RunDecode's result (tokens, every step's
// logits sha256, the witness chain, the trace) with fewer weight passes.
// Each step proposes up to max_proposals tokens from a ProposalSource
// (engine/proposal_source.h: prompt lookup by default, or a draft model)
// and feeds the step's token and the proposals as one
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
// and resetting when a proposal is kept. A step where the source guesses
// nothing is a plain step; from the kDryLookups-th such guess in a row on, it and
// the next 1, 2, 4 ... 64 steps run plain without asking. So a workload
// the proposer cannot guess costs about what plain decoding does. A run of
// steps known to be plain is promised to the backend at its first step
// (StepBackend::ExpectChainedSteps, up to the segment's end), so a
// pipeline relays them as in plain decoding.
//
// The steps are a DecodeSession's (engine/decode_session.h), so a server
// session decodes speculatively as `run` does: StepSpeculatively advances
// it by one (multi-row) step. A session that stops early stops exactly
// where plain decoding would: no proposal holds an end-of-sequence id of
// its stop rule (a row choosing one is then the last kept), and a session
// with a text stop rule (stop strings, checked after every token) steps
// plainly. Thread-compatible, as the backend.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "engine/decode.h"
#include "engine/decode_session.h"
#include "engine/proposal_source.h"
#include "engine/row_step.h"
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
inline constexpr uint32_t kDryLookups = 4;  // empty lookups in a row that start a plain run

// One session's speculation: its text so far (prompt and tokens chosen),
// its proposal source, the adaptive proposal budget and backoff above
// (the same whichever the source), and the counts.
class Speculator {
 public:
  // source: null for prompt lookup (LookupProposals of o.max_ngram).
  Speculator(std::span<const uint32_t> prompt, const SpeculativeOptions& o,
             std::unique_ptr<ProposalSource> source = nullptr);
  // The proposals for the next step after the prompt and `generated` (every
  // token the session has chosen, however it chose them: a server's
  // batched prefill chooses the first), at most `room` tokens, none
  // holding an id of `eos`. Empty: a plain step (no guess, or backing
  // off). An error only when the source fails (a draft model's step).
  Result<std::span<const uint32_t>> Propose(std::span<const uint32_t> generated, uint32_t room,
                                            std::span<const uint32_t> eos);
  // A step fed `proposed` proposals and returned `chosen` (kept + 1): the
  // budget and backoff follow it.
  void Observe(size_t proposed, std::span<const StepOutcome> chosen);
  // After a Propose that begins a run of plain steps (it proposes
  // nothing): the steps right after this one that are plain too. 0 at any
  // other step, so each run is promised once.
  uint32_t PlainStepsAhead() const { return plain_ahead_; }
  const SpeculativeStats& stats() const { return stats_; }

 private:

  SpeculativeOptions o_;
  std::unique_ptr<ProposalSource> source_;
  uint32_t budget_, skip_ = 0, backoff_ = 1;
  bool backoff_begins_ = false;  // the next Propose is a backoff's first
  uint32_t dry_ = 0;             // lookups in a row that found nothing
  uint32_t plain_ahead_ = 0;     // PlainStepsAhead()
  size_t prompt_size_;
  std::vector<uint32_t> history_, proposals_;  // history_: the prompt, then the tokens chosen
  SpeculativeStats stats_;
};

// One step of `s` (its next prompt chunk of at most prompt_budget tokens
// while the prompt is left, as DecodeSession::Step), the choosing one with
// the proposals of `speculator` as a multi-row step. Ok and nothing done
// when s is done. REQUIRES: s's backend is the one speculator follows.
Status StepSpeculatively(DecodeSession& s, Speculator& speculator,
                         size_t prompt_budget = SIZE_MAX);

// REQUIRES: a fresh backend (and a fresh source). Invalid as
// ValidateDecodeRequest. source: null for prompt lookup.
Result<DecodeResult> RunSpeculativeDecode(StepBackend& backend, const DecodeRequest& req,
                                          const WitnessSeed& seed, const SpeculativeOptions& o,
                                          SpeculativeStats* stats = nullptr,
                                          std::unique_ptr<ProposalSource> source = nullptr);

}  // namespace lockstep
