#include "engine/witness.h"

#include <bit>

namespace lockstep {

WitnessChain::WitnessChain(const WitnessSeed& seed, std::span<const uint32_t> prompt_ids) {
  stream_.Update(seed.weights_sha256);
  stream_.Update(seed.tokenizer_sha256);
  stream_.Update(seed.config_sha256);
  stream_.Update(seed.table_digest);
  stream_.Update(seed.inv_freq_table_digest);
  for (uint32_t id : prompt_ids) stream_.UpdateU32Le(id);
}

// A float's in-memory bytes are its u32 LE bits on the hosts we build for,
// so a step folds the logits' storage directly (no copy, no allocation).
static_assert(std::endian::native == std::endian::little);
void WitnessChain::AddStep(std::span<const float> logits, uint32_t token) {
  stream_.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(logits.data()),
                                          logits.size_bytes()));
  AddToken(token);
}

Result<WitnessChain> WitnessChain::Resume(const Sha256State& state) {
  LOCKSTEP_ASSIGN_OR_RETURN(Sha256Stream stream, Sha256Stream::Import(state));
  return WitnessChain(std::move(stream));
}

Digest ArgmaxDigest(std::span<const uint32_t> prompt_ids, std::span<const uint32_t> generated) {
  Sha256Stream s;
  for (uint32_t id : prompt_ids) s.UpdateU32Le(id);
  for (uint32_t id : generated) s.UpdateU32Le(id);
  return s.Finalize();
}

}  // namespace lockstep
