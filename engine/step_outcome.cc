#include "engine/step_outcome.h"

#include <bit>

namespace lockstep {

// The floats' in-memory bytes are their u32 LE bits on the hosts we build for.
static_assert(std::endian::native == std::endian::little);
Digest LogitsSha256(std::span<const float> logits) {
  Sha256Stream s;  // the stream allocates nothing (a decode step must not)
  s.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(logits.data()),
                                    logits.size_bytes()));
  return s.Finalize();
}

StepOutcome ChooseAndWitness(std::span<const float> logits, const SamplingParams& params,
                             uint32_t step, WitnessChain* chain, SamplingScratch* scratch) {
  StepOutcome out;
  out.token = ChooseToken(logits, params, step, scratch);  // §11.2
  chain->AddStep(logits, out.token);                       // §12.1 item 7
  out.logits_sha256 = LogitsSha256(logits);
  return out;
}

}  // namespace lockstep
