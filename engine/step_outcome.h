// What one decode step contributes, computed from its logits in one place:
// the token (ChooseToken, §11.2 / docs/sampling.md), the witness chain fold
// of logits || token (§12.1 item 7) and the sha256 of the logits bytes the
// receipts record. Every path that holds a step's logits uses it: RunDecode
// (through StepBackend), the server's scheduler and the last pipeline
// stage, so the digests cannot depend on where a step was chosen.
// ChooseAndWitnessAll does the same for several sessions' steps at once,
// spreading the two SHA-256 passes over a pool (each digest is still one
// stream fed in order on one thread) and, where the CPU hashes streams
// together (UpdateLanes), feeding up to four sessions' eight digests at
// once — with the same results.
// Thread-compatible (the chain and scratch belong to the caller).
#pragma once

#include <cstdint>
#include <span>

#include "base/sha256.h"
#include "engine/ops/thread_pool.h"
#include "engine/sampling.h"
#include "engine/witness.h"

namespace lockstep {

struct StepOutcome {
  uint32_t token = 0;
  Digest logits_sha256{};  // LogitsSha256 of the step's logits
};

// sha256 of one step's logits bytes (u32 LE bits, in vocab order).
Digest LogitsSha256(std::span<const float> logits);

// Chooses step `step`'s token, folds logits || token into *chain and
// hashes the logits, the hash on another thread of `pool` if one is free
// (null: all on the caller). REQUIRES: as ChooseToken (valid params,
// logits non-empty, a scratch when temperature > 0); chain not null.
StepOutcome ChooseAndWitness(std::span<const float> logits, const SamplingParams& params,
                             uint32_t step, WitnessChain* chain, SamplingScratch* scratch,
                             ops::ThreadPool* pool = nullptr);

// One session's step for ChooseAndWitnessAll: ChooseAndWitness's arguments
// and where its outcome goes. Distinct choices must not share a chain,
// a scratch or an outcome.
struct StepChoice {
  std::span<const float> logits;
  const SamplingParams* params = nullptr;
  uint32_t step = 0;
  WitnessChain* chain = nullptr;
  SamplingScratch* scratch = nullptr;
  StepOutcome* out = nullptr;
};

// Whether ChooseAndWitnessAll feeds up to four choices' eight digests
// together: where that pays on this CPU (Sha256LanesPay, the default), or
// always (so tests reach that path on every CPU; the outcomes are the same).
enum class Grouping : uint8_t { kWhereLanesPay, kAlways };

// ChooseAndWitness for every choice: the token and chain fold of a choice
// on one thread, its logits hash on any thread of `pool` (null: all on the
// caller). Every outcome and chain ends as calling ChooseAndWitness on the
// choices one after another would leave it.
void ChooseAndWitnessAll(std::span<const StepChoice> choices, ops::ThreadPool* pool,
                         Grouping grouping = Grouping::kWhereLanesPay);

}  // namespace lockstep
