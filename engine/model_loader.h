// Opening a model folder: locate and hash its three artifact files,
// verify optional pins, parse config.json (InspectModelDir: never reads the
// tensors), then open the checkpoint — one file or sharded — (OpenModelDir)
// and build Stages. The witness seed (§12.1 items 1-5) comes from here.
// Hash a folder once per process: InspectModelDir, then MapWeights if the
// weights are needed. OpenModel is move-only (it owns open files);
// thread-compatible.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "engine/io/model_config.h"
#include "engine/io/model_files.h"
#include "engine/io/checkpoint.h"
#include "engine/ops/kernels.h"
#include "engine/ops/thread_pool.h"
#include "engine/stage.h"
#include "engine/weights.h"
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

// A model folder with its checkpoint open (what a Stage loads from).
struct OpenModel : ModelInfo {
  std::unique_ptr<Checkpoint> weights;
};

// pins: checked before anything is parsed; a mismatch fails loudly (§2.1).
Result<ModelInfo> InspectModelDir(const std::string& dir, const ModelPins& pins);
// Opens the checkpoint of an inspected folder (headers only, no second
// hashing; loading later refuses files rewritten since this open).
Result<OpenModel> MapWeights(ModelInfo info);
// InspectModelDir then MapWeights.
Result<OpenModel> OpenModelDir(const std::string& dir, const ModelPins& pins);

// Validates the config for the forward pass (head_dim limits etc.).
Status CheckSupported(const ModelConfig& config);

// How a Stage computes. Every choice gives the same bits (CIS-2 §5);
// they differ only in speed and memory.
struct ComputeOptions {
  std::string isa = "auto";  // scalar|avx2|avx512|neon|auto (ops::KernelsByName)
  size_t threads = 1;        // compute threads, including the caller
  WeightFormat weights = WeightFormat::kPackedBf16;
};

// Invalid naming --isa for kernels this CPU lacks, or --threads for 0.
Status ValidateComputeOptions(const ComputeOptions& compute);

// A Stage with the thread pool it computes on (declared first, so it
// outlives the stage). Dereferences to the Stage.
struct LoadedStage {
  std::unique_ptr<ops::ThreadPool> pool;  // null for one thread
  std::unique_ptr<Stage> stage;

  explicit operator bool() const { return stage != nullptr; }
  Stage& operator*() const { return *stage; }
  Stage* operator->() const { return stage.get(); }
};

// The one way to build a Stage. Invalid as ValidateComputeOptions says.
Result<LoadedStage> LoadStage(const OpenModel& model, const StageSpec& spec,
                              const ComputeOptions& compute);

}  // namespace lockstep
