#include "engine/witness.h"

#include <bit>
#include <vector>

namespace lockstep {

WitnessChain::WitnessChain(const WitnessSeed& seed, std::span<const uint32_t> prompt_ids) {
  stream_.Update(seed.weights_sha256);
  stream_.Update(seed.tokenizer_sha256);
  stream_.Update(seed.config_sha256);
  stream_.Update(seed.table_digest);
  stream_.Update(seed.inv_freq_table_digest);
  for (uint32_t id : prompt_ids) stream_.UpdateU32Le(id);
}

void WitnessChain::AddStep(std::span<const float> logits, uint32_t token) {
  std::vector<uint8_t> bytes(logits.size() * 4);
  for (size_t i = 0; i < logits.size(); ++i) {
    const uint32_t b = std::bit_cast<uint32_t>(logits[i]);
    bytes[4 * i + 0] = static_cast<uint8_t>(b);
    bytes[4 * i + 1] = static_cast<uint8_t>(b >> 8);
    bytes[4 * i + 2] = static_cast<uint8_t>(b >> 16);
    bytes[4 * i + 3] = static_cast<uint8_t>(b >> 24);
  }
  stream_.Update(bytes);
  stream_.UpdateU32Le(token);
}

Digest ArgmaxDigest(std::span<const uint32_t> prompt_ids, std::span<const uint32_t> generated) {
  Sha256Stream s;
  for (uint32_t id : prompt_ids) s.UpdateU32Le(id);
  for (uint32_t id : generated) s.UpdateU32Le(id);
  return s.Finalize();
}

}  // namespace lockstep
