// Opening a model folder: locate and hash its three artifact files,
// verify optional pins, parse config.json, and build Stages from
// model.safetensors. The witness seed (§12.1 items 1-5) comes from here.
// Values are move-only (they own an mmap); thread-compatible.
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

struct OpenModel {
  ModelFiles files;
  ArtifactHashes hashes;
  ModelConfig config;
  std::unique_ptr<SafetensorsFile> weights;
  Digest table_digest{};
  Digest inv_freq_table_digest{};

  WitnessSeed Seed() const;
};

// pins: checked before anything is parsed; a mismatch fails loudly (§2.1).
Result<OpenModel> OpenModelDir(const std::string& dir, const ModelPins& pins);

// Validates the config for the forward pass (head_dim limits etc.).
Status CheckSupported(const ModelConfig& config);

Result<std::unique_ptr<Stage>> LoadStage(const OpenModel& model, const StageSpec& spec,
                                         const ops::Kernels& kernels);

}  // namespace lockstep
