// What the parts of a model weigh, as the checkpoint stores them (its
// tensor infos: a bf16 tensor two bytes an element, a quantized one what
// its blocks take), for planning a pipeline and for a worker's memory
// budget. Two measures per part:
//   resident   every byte of its tensors (what a stage holding it keeps);
//   per token  what one decode step reads of them: every tensor, except on
//              a MoE layer (E4), where a token reads the router and only
//              the k experts it chooses (counted as the k largest), and
//              the first stage's embedding, of which it reads one row.
// Plain data and stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/io/checkpoint.h"
#include "engine/io/model_config.h"
#include "engine/stage_tensors.h"

namespace lockstep {

struct PartBytes {
  uint64_t resident = 0;
  uint64_t per_token = 0;
  PartBytes& operator+=(const PartBytes& o) {
    resident += o.resident;
    per_token += o.per_token;
    return *this;
  }
};

struct ModelBytes {
  std::vector<PartBytes> layers;  // [num_layers]
  PartBytes first;                // the embedding table (first stage)
  PartBytes last;                 // final norm and LM head (the embedding when tied)

  // A stage's share: its layers, plus first/last as it is.
  PartBytes Stage(const StageSpec& spec) const;
};

// From the tensor infos of `weights` (headers only; nothing is read). An
// absent required tensor is NotFound naming it (optional biases count 0).
Result<ModelBytes> MeasureModelBytes(const Checkpoint& weights, const ModelConfig& cfg);
// One stage's share only (ModelBytes::Stage's sum), needing only the
// tensors it holds: a checkpoint opened for that stage will do.
Result<PartBytes> MeasureStageBytes(const Checkpoint& weights, const ModelConfig& cfg,
                                    const StageSpec& spec);

}  // namespace lockstep
