// Greedy decode with the CIS-2 witness chain (§3.4, §11.2, §12), over any
// StepBackend: a local Stage (monolithic) or a pipeline of workers
// (sharded). Both go through RunDecode, so the digests they print are
// computed by the same code from the logits the backend returns.
//
// Protocol: prefill the prompt; step s's logits are folded into the chain
// with the token ChooseToken chose (greedy argmax by default); evictions scheduled at step s are applied
// after its token is chosen; the token is then fed at the next position
// (the cache length). EOS is not checked. Exactly `gen` steps run.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/sampling.h"
#include "engine/witness.h"

namespace lockstep {

// `--evict FROM:COUNT@STEP`.
struct EvictSpec {
  uint32_t from = 0;
  uint32_t count = 0;
  uint32_t step = 0;
};
Result<EvictSpec> ParseEvictSpec(const std::string& text);

class StepBackend {
 public:
  virtual ~StepBackend() = default;
  // Runs `tokens` at positions [CacheLength(), CacheLength()+n) and returns
  // the logits of the last one. logits: resized to [vocab].
  virtual Status Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) = 0;
  // Removes cache entries [from, from+count) on every layer.
  virtual Status Evict(uint32_t from, uint32_t count) = 0;
  virtual uint32_t CacheLength() const = 0;
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
};

struct DecodeResult {
  std::vector<uint32_t> prompt;
  std::vector<uint32_t> generated;
  Digest cis2_ref{};
  Digest argmax_digest{};
  // Per step: sha256 of that step's logits bytes (each float's bits as u32
  // LE, vocab entries in order), so receipts never need the logits.
  std::vector<Digest> logits_sha256;
};

// sha256 of one step's logits bytes (u32 LE bits, in vocab order).
Digest LogitsSha256(std::span<const float> logits);

// Checks a request (non-empty prompt, eviction steps < gen, the largest
// cache length it reaches, evictions included, <= max_positions, sampling).
Status ValidateDecodeRequest(const DecodeRequest& req);

Result<DecodeResult> RunDecode(StepBackend& backend, const DecodeRequest& req,
                               const WitnessSeed& seed);

}  // namespace lockstep
