// The CIS-2 §12 digests of one decode.
//
// WitnessChain is the single SHA-256 stream of §12.1, seeded in the
// corrected item order: weights, tokenizer, config hashes (raw 32 bytes),
// table_digest, inv_freq_table_digest, then every prompt id (u32 LE); then
// for every step, the full logit vector's bits (u32 LE each) and the chosen
// token (u32 LE). ArgmaxDigest is §12.2's separate stream over prompt ids
// followed by generated ids. Not thread-safe; a chain is spent by Finalize.
//
// Export/Resume hand the chain's SHA-256 state to another process (the
// last pipeline stage folds a step in and hands it back): the stream stays
// one continuous §12.1 stream, so CIS2_REF does not depend on where each
// step was folded.
#pragma once

#include <cstdint>
#include <span>

#include "base/sha256.h"

namespace lockstep {

// The five seed inputs of §12.1 items 1-5.
struct WitnessSeed {
  Digest weights_sha256{};
  Digest tokenizer_sha256{};
  Digest config_sha256{};
  Digest table_digest{};
  Digest inv_freq_table_digest{};
};

class WitnessChain {
 public:
  WitnessChain(const WitnessSeed& seed, std::span<const uint32_t> prompt_ids);
  // §12.1 item 7: this step's logits (before its argmax) and its token.
  void AddStep(std::span<const float> logits, uint32_t token);
  // AddStep in two parts, for feeding the logits bytes together with other
  // streams (UpdateLanes, engine/io/sha256_lanes.h): the logits' bytes go
  // to logits_stream(), then AddToken — the same bytes in the same order.
  Sha256Stream* logits_stream() { return &stream_; }
  void AddToken(uint32_t token) { stream_.UpdateU32Le(token); }
  Digest Finalize() { return stream_.Finalize(); }

  Sha256State Export() const { return stream_.Export(); }
  // The chain continued from an exported state; Corrupt on a junk state.
  static Result<WitnessChain> Resume(const Sha256State& state);

 private:
  explicit WitnessChain(Sha256Stream stream) : stream_(std::move(stream)) {}
  Sha256Stream stream_;
};

Digest ArgmaxDigest(std::span<const uint32_t> prompt_ids, std::span<const uint32_t> generated);

}  // namespace lockstep
