#include "engine/model_loader.h"

#include <algorithm>
#include <thread>

#include "engine/ops/dispatch.h"
#include "engine/ops/pinned_math.h"
#include "engine/ops/rope.h"
#include "engine/rope_table.h"

namespace lockstep {

WitnessSeed ModelInfo::Seed() const {
  return WitnessSeed{hashes.weights, hashes.tokenizer, hashes.config, table_digest,
                     inv_freq_table_digest};
}

Status CheckSupported(const ModelConfig& c) {
  if (c.head_dim <= 0 || c.head_dim % 2 != 0 || c.head_dim > 1024) {
    return UnimplementedError("head_dim " + std::to_string(c.head_dim) +
                              " is not supported (even, at most 1024)");
  }
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    return InvalidError("num_attention_heads must be a multiple of num_key_value_heads");
  }
  return Status::Ok();
}

Result<ModelInfo> InspectModelDir(const std::string& dir, const ModelPins& pins) {
  ModelInfo m;
  LOCKSTEP_ASSIGN_OR_RETURN(m.files, LocateModelFiles(dir));
  // Every weight file hashed on its own thread.
  LOCKSTEP_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(m.files.weights_path));
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  LOCKSTEP_ASSIGN_OR_RETURN(m.hashes, HashArtifacts(m.files, ckpt, threads));
  LOCKSTEP_RETURN_IF_ERROR(VerifyPins(m.hashes, pins, ckpt.file_names()));
  LOCKSTEP_ASSIGN_OR_RETURN(m.config, LoadModelConfig(m.files.config_path));
  LOCKSTEP_RETURN_IF_ERROR(CheckSupported(m.config).WithContext(m.files.config_path));
  m.table_digest = ops::TableDigest();
  m.inv_freq_table_digest = ops::InvFreqDigest(ModelInvFreq(m.config));
  return m;
}

Result<OpenModel> MapWeights(ModelInfo info) {
  OpenModel m;
  static_cast<ModelInfo&>(m) = std::move(info);
  LOCKSTEP_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(m.files.weights_path));
  m.weights = std::make_unique<Checkpoint>(std::move(ckpt));
  return m;
}

Result<OpenModel> OpenModelDir(const std::string& dir, const ModelPins& pins) {
  LOCKSTEP_ASSIGN_OR_RETURN(ModelInfo info, InspectModelDir(dir, pins));
  return MapWeights(std::move(info));
}

Status ValidateComputeOptions(const ComputeOptions& compute) {
  if (ops::KernelsByName(compute.isa) == nullptr) {
    return InvalidError("--isa " + compute.isa + " is unknown or not supported by this CPU");
  }
  if (compute.threads == 0) return InvalidError("--threads must be at least 1");
  return Status::Ok();
}

Result<LoadedStage> LoadStage(const OpenModel& model, const StageSpec& spec,
                              const ComputeOptions& compute) {
  LOCKSTEP_RETURN_IF_ERROR(ValidateComputeOptions(compute));
  const ops::Kernels* kernels = ops::KernelsByName(compute.isa);
  LoadedStage out;
  if (compute.threads > 1) {
    LOCKSTEP_ASSIGN_OR_RETURN(out.pool, ops::ThreadPool::Create(compute.threads));
  }
  LOCKSTEP_ASSIGN_OR_RETURN(StageWeights w, LoadStageWeights(*model.weights, model.config, spec,
                                                             compute.weights, out.pool.get()));
  out.stage = std::make_unique<Stage>(model.config, std::move(w), *kernels,
                                      StageOptions{out.pool.get()});
  return out;
}

}  // namespace lockstep
