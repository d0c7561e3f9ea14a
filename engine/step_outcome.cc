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
                             uint32_t step, WitnessChain* chain, SamplingScratch* scratch,
                             ops::ThreadPool* pool) {
  StepOutcome out;
  const StepChoice choice{logits, &params, step, chain, scratch, &out};
  ChooseAndWitnessAll(std::span(&choice, 1), pool);
  return out;
}

void ChooseAndWitnessAll(std::span<const StepChoice> choices, ops::ThreadPool* pool) {
  // Item 2i: choice i's token and chain fold; item 2i + 1: its logits hash.
  // The two read the same logits and write different fields.
  ops::ForEachChunk(pool, 2 * choices.size(), 1, [&](size_t b, size_t e, size_t) {
    for (size_t item = b; item < e; ++item) {
      const StepChoice& c = choices[item / 2];
      if (item % 2 == 0) {
        c.out->token = ChooseToken(c.logits, *c.params, c.step, c.scratch);  // §11.2
        c.chain->AddStep(c.logits, c.out->token);                            // §12.1 item 7
      } else {
        c.out->logits_sha256 = LogitsSha256(c.logits);
      }
    }
  });
}

}  // namespace lockstep
