// Opening a model folder: locate and hash its three artifact files,
// verify optional pins, parse config.json (InspectModelDir: never maps the
// weights), then map model.safetensors (OpenModelDir) and build Stages.
// The witness seed (§12.1 items 1-5) comes from here. Hash a folder once
// per process: InspectModelDir, then MapWeights if the weights are needed.
// OpenModel is move-only (it owns an mmap); thread-compatible.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/io/model_config.h"
#include "engine/io/model_files.h"
#include "engine/io/safetensors.h"
#include "engine/ops/kernels.h"
#include "engine/stage.h"
#include "engine/witness.h"

namespace lockstep {

// What a model folder is, without its weights: what a coordinator needs.
struct ModelInfo {
  ModelFiles files;
  ArtifactHashes hashes;
  ModelConfig config;
  Digest table_digest{};
  Digest inv_freq_table_digest{};

  WitnessSeed Seed() const;
};

// A model folder with model.safetensors mapped (what a Stage loads from).
struct OpenModel : ModelInfo {
  std::unique_ptr<SafetensorsFile> weights;
};

// pins: checked before anything is parsed; a mismatch fails loudly (§2.1).
Result<ModelInfo> InspectModelDir(const std::string& dir, const ModelPins& pins);
// Maps the weights of an inspected folder (no second hashing).
Result<OpenModel> MapWeights(ModelInfo info);
// InspectModelDir then MapWeights.
Result<OpenModel> OpenModelDir(const std::string& dir, const ModelPins& pins);

// Validates the config for the forward pass (head_dim limits etc.).
Status CheckSupported(const ModelConfig& config);

Result<std::unique_ptr<Stage>> LoadStage(const OpenModel& model, const StageSpec& spec,
                                         const ops::Kernels& kernels);

}  // namespace lockstep
