#include "engine/step_outcome.h"

#include <algorithm>
#include <array>
#include <bit>

#include "engine/io/sha256_lanes.h"

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

namespace {

std::span<const uint8_t> BytesOf(std::span<const float> logits) {
  return {reinterpret_cast<const uint8_t*>(logits.data()), logits.size_bytes()};
}

// Two choices whose four digests (each one's chain and logits hash) are
// fed together: UpdateLanes costs ~2.3 streams for the four where the CPU
// hashes lanes together (a lone pair of streams costs more than two
// separate ones, so an odd choice is left to ChooseHalf).
void ChoosePair(std::span<const StepChoice, 2> pair) {
  std::array<Sha256Stream, 2> hashes;
  std::array<Sha256Stream*, 4> streams{};
  std::array<std::span<const uint8_t>, 4> bytes;
  for (size_t i = 0; i < 2; ++i) {
    const StepChoice& c = pair[i];
    c.out->token = ChooseToken(c.logits, *c.params, c.step, c.scratch);  // §11.2
    streams[2 * i] = c.chain->logits_stream();                          // §12.1 item 7
    streams[2 * i + 1] = &hashes[i];
    bytes[2 * i] = bytes[2 * i + 1] = BytesOf(c.logits);
  }
  UpdateLanes(streams, bytes);
  for (size_t i = 0; i < 2; ++i) {
    pair[i].chain->AddToken(pair[i].out->token);
    pair[i].out->logits_sha256 = hashes[i].Finalize();
  }
}

// Half of one choice: its token and chain fold, or its logits hash. The
// two halves read the same logits and write different fields.
void ChooseHalf(const StepChoice& c, bool hash) {
  if (hash) {
    c.out->logits_sha256 = LogitsSha256(c.logits);
  } else {
    c.out->token = ChooseToken(c.logits, *c.params, c.step, c.scratch);  // §11.2
    c.chain->AddStep(c.logits, c.out->token);                            // §12.1 item 7
  }
}

}  // namespace

void ChooseAndWitnessAll(std::span<const StepChoice> choices, ops::ThreadPool* pool,
                         Pairing pairing) {
  // Items: the pairs (where lanes pay), then the other choices' halves.
  const bool paired = pairing == Pairing::kAlways || Sha256LanesVectorized();
  const size_t pairs = paired ? choices.size() / 2 : 0;
  const std::span<const StepChoice> rest = choices.subspan(2 * pairs);
  ops::ForEachChunk(pool, pairs + 2 * rest.size(), 1, [&](size_t b, size_t e, size_t) {
    for (size_t item = b; item < e; ++item) {
      if (item < pairs) {
        ChoosePair(choices.subspan(2 * item).first<2>());
      } else {
        ChooseHalf(rest[(item - pairs) / 2], (item - pairs) % 2 == 1);
      }
    }
  });
}

}  // namespace lockstep
