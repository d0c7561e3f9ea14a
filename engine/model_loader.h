// Opening a model folder and building Stages. The witness seed (§12.1
// items 1-5) comes from here.
//
// A model is a folder or one .gguf file (model_files.h).
//
// InspectModelDir hashes every artifact file (and a GGUF file's parts) and
// verifies the pins without keeping a tensor (what a coordinator needs). OpenModelDir hashes
// config.json and tokenizer.json, checks their pins, parses the config and
// opens the checkpoint (every file, or with a stage only the files holding
// that stage's tensors) without reading the weights: LoadStage reads them
// and hashes the files it opened in the same pass, then records the
// digests in the OpenModel and verifies them — against the pins and against
// digests an earlier InspectModelDir computed — before it returns a Stage,
// so nothing is computed from unverified bytes. OpenModel is move-only (it
// owns open files); thread-compatible.
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
#include "engine/stage_bytes.h"
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
// hashes.weight_files is empty until LoadStage (unless inspected), and
// hashes.weights stays all zero unless every weight file was opened.
struct OpenModel : ModelInfo {
  std::unique_ptr<Checkpoint> weights;
  ModelPins pins;  // verified again by LoadStage once the weights are hashed
};

// pins: checked before anything is parsed; a mismatch fails loudly (§2.1).
Result<ModelInfo> InspectModelDir(const std::string& dir, const ModelPins& pins);
// Opens the checkpoint of an inspected folder (headers only); LoadStage
// then refuses files whose bytes differ from the inspected digests.
Result<OpenModel> MapWeights(ModelInfo info);
// Opens a folder without reading its weights (see above). With `stage`
// (validated against the config here: Invalid naming the bad field), a
// sharded checkpoint opens only the files holding that stage's tensors.
Result<OpenModel> OpenModelDir(const std::string& dir, const ModelPins& pins,
                               const StageSpec* stage = nullptr);

// What a coordinator tells a worker to expect of a sharded checkpoint: the
// digests (from `model`, inspected) of the index and of every file holding
// a tensor of `spec`, the index first; of a GGUF file, the digests of the
// parts the stage reads (Checkpoint::digest_names, docs/spec_notes.md).
// Empty for a single safetensors file. REQUIRES a validated spec.
Result<std::vector<FileDigest>> StageWeightFiles(const ModelInfo& model, const StageSpec& spec);

// What each part of a model weighs (stage_bytes.h), from the tensor
// infos of its checkpoint (headers only: every file opened, none read).
Result<ModelBytes> MeasureModelBytes(const ModelFiles& files, const ModelConfig& config);

// Validates a config (parsed, or built from another format) for the
// forward pass: head_dim limits, the MLP sizes, E4's expert counts;
// Invalid naming the field.
Status CheckSupported(const ModelConfig& config);

// How a Stage computes. Every choice gives the same bits (CIS-2 §5);
// they differ only in speed and memory.
struct ComputeOptions {
  std::string isa = "auto";  // scalar|avx2|avx512|neon|auto (ops::KernelsByName)
  size_t threads = 1;        // compute threads, including the caller
  WeightFormat weights = WeightFormat::kPackedBf16;
  // A weight cache directory (weight_cache.h; empty: none). It changes
  // only how fast the weights load, never what they are.
  std::string weight_cache{};
};

// Invalid naming --isa for kernels this CPU lacks, or --threads for 0.
Status ValidateComputeOptions(const ComputeOptions& compute);

// A Stage with the thread pool it computes on (declared first, so it
// outlives the stage). Dereferences to the Stage.
struct LoadedStage {
  std::unique_ptr<ops::ThreadPool> pool;  // null for one thread
  std::unique_ptr<Stage> stage;
  std::string weight_cache_note;  // what the load did with the weight cache, if one was given

  explicit operator bool() const { return stage != nullptr; }
  Stage& operator*() const { return *stage; }
  Stage* operator->() const { return stage.get(); }
};

// The one way to build a Stage: reads and hashes the opened weight files on
// compute.threads threads, then records and verifies their digests in
// `model` (Mismatch naming the file). Invalid as ValidateComputeOptions says.
Result<LoadedStage> LoadStage(OpenModel& model, const StageSpec& spec,
                              const ComputeOptions& compute);

}  // namespace lockstep
