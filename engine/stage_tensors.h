// The part of a model a pipeline stage runs (StageSpec) and the checkpoint
// tensors it reads: names and shapes as the config says (CIS-2 §2.5, with
// Qwen3's q/k norms, E3, and a MoE layer's router and experts, E4). One
// list that the loader, the shard filter and the planner all walk.
// Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/io/checkpoint.h"
#include "engine/io/model_config.h"

namespace lockstep {

// Which part of the model a stage runs.
struct StageSpec {
  int lo = 0;          // first layer, absolute index
  int hi = 0;          // one past the last layer
  bool first = false;  // embeds token ids
  bool last = false;   // final norm + LM head
};

// "model.layers.L.<suffix>" and, E4, "model.layers.L.mlp.experts.E.<suffix>".
std::string LayerTensorName(int layer, const char* suffix);
std::string ExpertTensorName(int layer, int expert, const char* suffix);

// fn(name, shape, optional) for each tensor; `optional` ones (biases) may
// be absent from a checkpoint.
using StageTensorFn =
    std::function<void(const std::string& name, std::vector<int64_t> shape, bool optional)>;

// Layer l's tensors, in checkpoint order: norms, attention, then the dense
// MLP or the router and every expert (ascending index).
void ForEachLayerTensor(const ModelConfig& cfg, int layer, const StageTensorFn& fn);
// The stage's: the embedding when first (or last and tied), its layers,
// the final norm and untied LM head when last.
void ForEachStageTensor(const ModelConfig& cfg, const StageSpec& spec, const StageTensorFn& fn);

// Selects the tensors a stage reads (for Checkpoint::Open, so a stage opens
// only the shard files that hold them). REQUIRES: a validated spec.
Checkpoint::Filter StageTensorFilter(const ModelConfig& cfg, const StageSpec& spec);

}  // namespace lockstep
