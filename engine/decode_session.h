// DecodeSession: one decode's state machine, the same for every front end
// (`run`, `serve` in process and on a cluster, `bench`, `verify`): the
// prompt cursor (a prompt may be fed in chunks), the step index, the
// witness chain, the evictions due after each step, the stop rule and the
// result. It never computes: a step's forward runs on its StepBackend,
// either alone (Step) or batched with other sessions' steps by a
// BatchStepper (engine/batch_stepper.h), which feeds NextTokens, chooses
// with Context() and reports back through Fed / Chose. Either way the
// session's bits are the same: a step's logits do not depend on the batch
// or the chunking (engine/stage.h), and tokens are chosen by
// ChooseAndWitness with the step index.
//
// Protocol (as RunDecode, engine/decode.h): the prompt is fed first (in
// chunks of at most the caller's budget; only the chunk that completes it
// chooses a token, step 0); each later step feeds the previous token.
// After step s's token: the evictions scheduled at s are applied on the
// backend, then the stop rule is checked (a token in `eos`, or `text`
// returning true), then the `gen` bound. A multi-row step (several tokens
// whose every row's logits are kept: StepSpeculatively, engine/
// speculative.h) reports each row through Chose, with that row's trace.
//
// REQUIRES: ValidateDecodeRequest(req) is Ok (the session keeps a copy);
// the backend outlives the session and holds exactly the first `cached`
// prompt tokens (a reused prefix), cached < prompt size. Allocates at
// construction only (results reserved for `gen` steps; traces excepted).
// Thread-compatible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/decode.h"

namespace lockstep {

// What ends a session before `gen` steps. Empty: nothing (RunDecode).
struct StopRule {
  std::vector<uint32_t> eos;
  // Called after each step with every token generated so far (may be empty).
  std::function<bool(std::span<const uint32_t> generated)> text;
};

class DecodeSession {
 public:
  enum class End : uint8_t { kRunning, kLength, kStop };

  DecodeSession(StepBackend& backend, const DecodeRequest& req, const WitnessSeed& seed,
                StopRule stop = {}, size_t cached = 0);
  DecodeSession(const DecodeSession&) = delete;
  DecodeSession& operator=(const DecodeSession&) = delete;

  StepBackend& backend() const { return backend_; }
  const DecodeRequest& request() const { return req_; }
  bool done() const { return end_ != End::kRunning; }
  End end() const { return end_; }
  bool prefilling() const { return fed_ < req_.prompt.size(); }
  size_t steps() const { return generated_.size(); }
  std::span<const uint32_t> generated() const { return generated_; }

  // The next step's tokens: a prompt chunk of at most *prompt_budget
  // tokens (taken from it), or the last token chosen. Empty when done, or
  // when prompt is left and the budget is spent.
  std::span<const uint32_t> NextTokens(size_t* prompt_budget);
  // Whether feeding `n` tokens from NextTokens yields a token (the chunk
  // completes the prompt, or the session decodes).
  bool Chooses(size_t n) const { return fed_ + n >= req_.prompt.size(); }
  // The context of the next choosing step (its index, the sampling, the
  // chain, a scratch and a [vocab] logits buffer of the session's own).
  const StepContext& Context();

  // Bookkeeping of a step that fed `n` prompt tokens and chose nothing.
  void Fed(size_t n);
  // Bookkeeping of a step that fed `n` tokens and chose `o`: records it
  // (with `trace`, or when null the backend's StepTrace), applies the
  // evictions due, checks the stop rule and the bound. An eviction's
  // failure is returned naming it.
  Status Chose(size_t n, const StepOutcome& o, const std::vector<Digest>* trace = nullptr);
  const StopRule& stop_rule() const { return stop_; }

  // One step alone on the backend: NextTokens(budget), then Feed (a chunk
  // that chooses nothing) or FeedAndChoose, then Fed/Chose. Before each run
  // of steps no eviction interrupts, the backend hears how many follow
  // (StepBackend::ExpectChainedSteps). Ok and nothing done when done().
  Status Step(size_t prompt_budget = SIZE_MAX);

  // The decode's result (final once done()).
  DecodeResult result() const;

 private:
  Status ApplyEvictions(uint32_t step);
  bool Stops(uint32_t token) const;

  StepBackend& backend_;
  const DecodeRequest req_;
  StopRule stop_;
  WitnessChain chain_;
  SamplingScratch sampling_;
  std::vector<float> logits_;
  StepContext ctx_;
  size_t fed_ = 0;              // prompt tokens in the backend's cache
  bool promise_due_ = true;     // ExpectChainedSteps before the next chosen step
  End end_ = End::kRunning;
  uint32_t last_[1] = {0};
  std::vector<uint32_t> generated_;
  std::vector<Digest> logits_sha256_;
  std::vector<std::vector<Digest>> layer_digests_;
};

}  // namespace lockstep
