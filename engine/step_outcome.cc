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

// Up to kGroup choices whose digests (each one's chain and logits hash,
// two streams per choice) are fed together through UpdateLanes.
constexpr size_t kGroup = kSha256Lanes / 2;

void ChooseGroup(std::span<const StepChoice> group) {
  std::array<Sha256Stream, kGroup> hashes;
  std::array<Sha256Stream*, kSha256Lanes> streams{};
  std::array<std::span<const uint8_t>, kSha256Lanes> bytes;
  const size_t n = group.size();
  for (size_t i = 0; i < n; ++i) {
    const StepChoice& c = group[i];
    c.out->token = ChooseToken(c.logits, *c.params, c.step, c.scratch);  // §11.2
    streams[2 * i] = c.chain->logits_stream();                          // §12.1 item 7
    streams[2 * i + 1] = &hashes[i];
    bytes[2 * i] = bytes[2 * i + 1] = BytesOf(c.logits);
  }
  UpdateLanes(std::span(streams).first(2 * n), std::span(bytes).first(2 * n));
  for (size_t i = 0; i < n; ++i) {
    group[i].chain->AddToken(group[i].out->token);
    group[i].out->logits_sha256 = hashes[i].Finalize();
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
                         Grouping grouping) {
  // Items: groups of kGroup choices where their streams hashed together
  // pay (the last group may be smaller), then the other choices' halves.
  const bool always = grouping == Grouping::kAlways;
  size_t grouped = always || Sha256LanesPay(kSha256Lanes) ? choices.size() / kGroup * kGroup : 0;
  const size_t left = choices.size() - grouped;
  if (left > 1 && (always || Sha256LanesPay(2 * left))) grouped = choices.size();
  const size_t groups = (grouped + kGroup - 1) / kGroup;
  const std::span<const StepChoice> rest = choices.subspan(grouped);
  ops::ForEachChunk(pool, groups + 2 * rest.size(), 1, [&](size_t b, size_t e, size_t) {
    for (size_t item = b; item < e; ++item) {
      if (item < groups) {
        const size_t at = item * kGroup;
        ChooseGroup(choices.subspan(at, std::min(kGroup, grouped - at)));
      } else {
        ChooseHalf(rest[(item - groups) / 2], (item - groups) % 2 == 1);
      }
    }
  });
}

}  // namespace lockstep
