// RowStepTrace: the trace mode's layer digests (docs/receipts.md) of a
// multi-row step fed in chunks (engine/row_step.h). A step's digest of a
// layer is the sha256 of the [rows][hidden] words of the rows fed since the
// step before, up to and including its own row, after that layer: what
// LayerTrace records when those rows are fed alone. The rows are cut into
// those segments; one sha256 stream per layer runs over a segment across
// chunks, so a segment may span several Forward calls.
// Thread-compatible: belongs to the ForwardScratch's caller.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "base/sha256.h"
#include "engine/layer_trace.h"

namespace lockstep {

class RowStepTrace final : public LayerObserver {
 public:
  explicit RowStepTrace(size_t layers = 0) : layers_(layers), streams_(layers) {}

  // Starts a multi-row step: no segment open, none done.
  void Start();
  // The next Forward's `rows` rows, of which those in [steps_from, rows)
  // are step rows (each ends a segment). REQUIRES steps_from <= rows.
  void SetChunk(size_t rows, size_t steps_from);
  // Layers arrive in order, once per SetChunk each.
  void AfterLayer(int layer, std::span<float> hidden) override;
  // [segment][layer]: the digests of every segment ended since Start.
  std::vector<std::vector<Digest>>& done() { return done_; }

 private:
  size_t layers_;
  std::vector<Sha256Stream> streams_;  // [layer]: the open segment's
  std::vector<std::vector<Digest>> done_;
  size_t rows_ = 0, steps_from_ = 0, first_done_ = 0, layer_ = 0;
};

}  // namespace lockstep
