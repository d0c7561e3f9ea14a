// BatchStepper: advances several DecodeSessions (engine/decode_session.h)
// by one step each, as one batch: the one way the server's scheduler and
// `lockstep bench` step sessions together. Each session in the batch that
// gets tokens (NextTokens, the prompt budget shared in batch order: a
// session whose prompt is left when it is spent sits the step out) feeds
// them, and those whose step chooses get their token through Context and
// Chose; sessions that are done are skipped. A session's bits equal its
// solo RunDecode whatever it is batched with (engine/stage.h).
//
// Implementations: LocalBatchStepper below (one in-process Stage with
// every layer: one ForwardBatch + LogitsBatch, every choice at once on the
// stage's pool) and the cluster one in runtime/cluster_stepper.h (every
// session's step sent to the pipeline at once, then all awaited; the
// workers batch what they find queued).
// Thread-compatible: one thread steps a stepper and its sessions.
#pragma once

#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/decode_session.h"
#include "engine/stage.h"

namespace lockstep {

class BatchStepper {
 public:
  virtual ~BatchStepper() = default;
  // One step of the sessions of `batch`. status[i] (status.size() ==
  // batch.size()) is set to session i's failure, if any; the others carry
  // on. Returns the number of sessions that ran a step.
  virtual size_t Step(std::span<DecodeSession* const> batch, size_t prompt_budget,
                      std::span<Status> status) = 0;
};

// REQUIRES: every session's backend is a LocalBackend on `stage` (else its
// status says so); stage holds every layer and outlives the stepper.
// Traces are not recorded on batched steps. With Reserve(rows, keys) made
// for the largest step, a step allocates nothing.
class LocalBatchStepper final : public BatchStepper {
 public:
  explicit LocalBatchStepper(const Stage& stage) : stage_(stage) {}
  // Sizes the buffers for steps of up to `rows` rows (tokens over all
  // sessions, `sessions` of them) over caches of up to `keys` positions.
  void Reserve(size_t rows, size_t sessions, size_t keys);
  size_t Step(std::span<DecodeSession* const> batch, size_t prompt_budget,
              std::span<Status> status) override;

 private:
  // Embeds the sessions' tokens into their backends' rows; fills items_, fed_.
  void Gather(std::span<DecodeSession* const> batch, size_t prompt_budget,
              std::span<Status> status);
  // The logits of every choosing session's last row, then every choice.
  void ChooseAll(std::span<DecodeSession* const> batch, std::span<Status> status);

  const Stage& stage_;
  ForwardScratch scratch_;
  std::vector<Stage::BatchItem> items_;
  std::vector<std::pair<size_t, size_t>> fed_;      // (session index, tokens fed)
  std::vector<std::pair<size_t, size_t>> choose_;   // the choosing ones among them
  std::vector<float> rows_, logits_;                // [choosing][hidden], [choosing][vocab]
  std::vector<StepChoice> choices_;
  std::vector<StepOutcome> outcomes_;
};

}  // namespace lockstep
