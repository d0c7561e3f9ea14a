// LocalBackend: a StepBackend that runs one in-process Stage holding every
// layer (a monolithic run) over its own KvCache and ForwardScratch. This is
// the path `lockstep run` and `lockstep bench` both time: with the cache
// reserved for the whole decode, a decode step (Feed of one token)
// allocates nothing once the prefill has sized the scratch. FeedRows
// computes its rows in passes (engine/row_passes.h: one pass over the
// weights per chunk, logits of at most kRowsPerPass rows held), so a
// multi-row step of any length needs no more memory than a decode of it
// plus those rows.
// `stage` must outlive the backend. Thread-compatible.
#pragma once

#include <vector>

#include "engine/decode.h"
#include "engine/kv_cache.h"
#include "engine/layer_trace.h"
#include "engine/row_passes.h"
#include "engine/row_step.h"
#include "engine/row_step_trace.h"
#include "engine/stage.h"

namespace lockstep {

class LocalBackend final : public StepBackend {
 public:
  // REQUIRES: stage.spec() is first and last. reserve_positions: cache
  // entries (and attention keys) reserved up front, e.g. prompt + gen; the
  // cache still grows past it, allocating.
  explicit LocalBackend(const Stage& stage, size_t reserve_positions = 0);
  // Resumes from a cloned prefix, reserving up to reserve_positions.
  LocalBackend(const Stage& stage, KvCache cache, size_t reserve_positions = 0);

  Status Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) override;
  // Feed, then ChooseAndWitness with its two digests on the stage's pool.
  Result<StepOutcome> FeedAndChoose(std::span<const uint32_t> tokens,
                                    const StepContext& ctx) override;
  // Rows computed together, in passes (engine/row_passes.h, row_step.h).
  Status FeedRows(std::span<const uint32_t> tokens, uint32_t rows, const StepContext& ctx,
                  RowSteps* out) override;
  Status Evict(uint32_t from, uint32_t count) override;
  uint32_t CacheLength() const override { return static_cast<uint32_t>(cache_.size()); }

  // Records, from the next Feed on, the per-layer hidden-state digests
  // StepTrace returns (docs/receipts.md, trace mode).
  void EnableTrace();
  std::span<const Digest> StepTrace() const override { return trace_.digests(); }

  // Overrides the window of every layer (`--window W`); Invalid for W < 0.
  Status SetWindow(int window);
  KvCache& cache() { return cache_; }
  const Stage& stage() const { return stage_; }
  // For a step batched with other sessions' (LocalBatchStepper): the rows
  // it embeds into and runs in place. Such a step is not traced.
  std::vector<float>& batch_rows() {
    trace_.Clear();
    return hidden_;
  }

 private:
  const Stage& stage_;
  KvCache cache_;
  ForwardScratch scratch_;
  std::vector<float> hidden_;  // [n][hidden]
  LayerTrace trace_;           // the last Feed's digests when tracing
  bool tracing_ = false;
  RowStepTrace row_trace_;     // FeedRows' digests when tracing
  std::vector<float> row_logits_;  // [<= kRowsPerPass][vocab]

  // FeedRows' tokens [at, end) in one pass; `first`: the first step row's
  // index in tokens. Sets *ended when a step's token differs from the next.
  Status FeedPass(std::span<const uint32_t> tokens, size_t at, size_t end, size_t first,
                  const StepContext& ctx, RowSteps* out, bool* ended);
};

}  // namespace lockstep
