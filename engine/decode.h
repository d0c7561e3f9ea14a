// Greedy decode with the CIS-2 witness chain (§3.4, §11.2, §12), over any
// StepBackend: a local Stage (monolithic) or a pipeline of workers
// (sharded). Both go through RunDecode, so the digests they print are
// computed by the same code from the logits the backend returns.
//
// Protocol: step 0 feeds the prompt, step s > 0 feeds step s-1's token at
// the next position (the cache length); each step's logits give its token
// and chain fold through ChooseAndWitness (engine/step_outcome.h), on
// whichever side of the backend holds them. Evictions scheduled at step s
// are applied after its token is chosen. EOS is not checked. Exactly `gen`
// steps run. Before each run of steps no eviction interrupts, the backend
// hears how many follow (StepBackend::ExpectChainedSteps).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/sampling.h"
#include "engine/step_outcome.h"
#include "engine/witness.h"

namespace lockstep {

// `--evict FROM:COUNT@STEP`.
struct EvictSpec {
  uint32_t from = 0;
  uint32_t count = 0;
  uint32_t step = 0;
};
Result<EvictSpec> ParseEvictSpec(const std::string& text);

// One decode step's inputs besides its tokens. The chain is in/out: the
// step folds its logits || token into it.
struct StepContext {
  uint32_t step = 0;                      // decode step (0 = first generated token)
  SamplingParams sampling;                // as in the DecodeRequest
  WitnessChain* chain = nullptr;          // not null
  SamplingScratch* scratch = nullptr;     // for a backend that holds the logits
  std::vector<float>* logits = nullptr;   // [vocab] buffer, likewise
};

struct RowSteps;  // engine/row_step.h

class StepBackend {
 public:
  virtual ~StepBackend() = default;
  // Runs `tokens` at positions [CacheLength(), CacheLength()+n) and returns
  // the logits of the last one. logits: resized to [vocab].
  virtual Status Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) = 0;
  // Feeds `tokens` as Feed does and returns the step's outcome: the token
  // chosen from the last position's logits and their sha256, with the
  // chain advanced. Default: Feed into ctx.logits, then ChooseAndWitness.
  // A backend whose logits live elsewhere overrides it to choose there.
  virtual Result<StepOutcome> FeedAndChoose(std::span<const uint32_t> tokens,
                                            const StepContext& ctx);
  // A promise about the calls that follow: after the next FeedAndChoose,
  // `steps` more FeedAndChoose calls come, each feeding exactly the one
  // token the call before it returned, with nothing else in between. A
  // backend may start those steps before they are asked for (a pipeline
  // relays them without a round trip through its coordinator). A caller
  // that breaks the promise costs time, never bits. Default: ignored.
  virtual void ExpectChainedSteps(uint32_t steps) { (void)steps; }
  // Several steps in one call: feeds `tokens`, the rows of the last `rows`
  // being steps ctx.step, ctx.step+1, ... (the contract: engine/row_step.h).
  // Default: one FeedAndChoose per step.
  virtual Status FeedRows(std::span<const uint32_t> tokens, uint32_t rows, const StepContext& ctx,
                          RowSteps* out);
  // Removes cache entries [from, from+count) on every layer.
  virtual Status Evict(uint32_t from, uint32_t count) = 0;
  virtual uint32_t CacheLength() const = 0;
  // A tracing backend: the sha256 of the hidden state after each layer of
  // its last Feed/FeedAndChoose, layer 0 first (docs/receipts.md, trace).
  // Empty when it does not trace.
  virtual std::span<const Digest> StepTrace() const { return {}; }
};

struct DecodeRequest {
  std::vector<uint32_t> prompt;     // non-empty
  uint32_t gen = 16;
  std::vector<EvictSpec> evictions; // applied in order
  // Positions the model supports (MaxPositions in base/limits.h of its
  // max_position_embeddings). A request whose cache would grow past it is
  // refused before any token is fed. 0: no bound known to the caller.
  uint32_t max_positions = 0;
  SamplingParams sampling;          // default: greedy
  // `--window W` / "window": W for every layer, else the model's own
  // windows. Applied where the backend's cache is made (LocalBackend::
  // SetWindow, Coordinator::OpenSession); W >= 0.
  std::optional<int> window;
};

struct DecodeResult {
  std::vector<uint32_t> prompt;
  std::vector<uint32_t> generated;
  Digest cis2_ref{};
  Digest argmax_digest{};
  // Per step: sha256 of that step's logits bytes (each float's bits as u32
  // LE, vocab entries in order), so receipts never need the logits.
  std::vector<Digest> logits_sha256;
  // Per step, the backend's StepTrace ([step][layer]); empty when untraced.
  std::vector<std::vector<Digest>> layer_digests;
};

// Checks a request (non-empty prompt, eviction steps < gen, the largest
// cache length it reaches, evictions included, <= max_positions, sampling,
// window >= 0): the one check every front end applies (`run`, `serve`,
// `verify`, the coordinator).
Status ValidateDecodeRequest(const DecodeRequest& req);

// The last step of the run of steps that starts at `step` with no
// eviction in between: the first eviction step >= step, or req.gen - 1.
uint32_t SegmentEnd(const DecodeRequest& req, uint32_t step);

// Applies, in order, every eviction req schedules after step `step`.
Status ApplyEvictionsAfter(StepBackend& backend, const DecodeRequest& req, uint32_t step);

Result<DecodeResult> RunDecode(StepBackend& backend, const DecodeRequest& req,
                               const WitnessSeed& seed);

}  // namespace lockstep
