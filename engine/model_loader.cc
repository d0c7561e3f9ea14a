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

namespace {

// E4's sizes, whatever the config came from: Invalid naming the field.
Status CheckMoe(const ModelConfig& c) {
  const ConfigLimits& l = kConfigLimits;
  const MoeConfig& m = c.moe;
  if (m.num_experts < 0 || m.num_experts > l.num_experts) {
    return InvalidError("num_experts " + std::to_string(m.num_experts) + " is not in [0, " +
                        std::to_string(l.num_experts) + "]");
  }
  if (!c.is_moe()) {
    if (c.intermediate_size <= 0 || c.intermediate_size > l.intermediate_size) {
      return InvalidError("intermediate_size " + std::to_string(c.intermediate_size) +
                          " is not in [1, " + std::to_string(l.intermediate_size) + "]");
    }
    return Status::Ok();
  }
  if (m.experts_per_tok < 1 || m.experts_per_tok > m.num_experts) {
    return InvalidError("num_experts_per_tok " + std::to_string(m.experts_per_tok) +
                        " is not in [1, num_experts " + std::to_string(m.num_experts) + "]");
  }
  if (m.intermediate_size <= 0 || m.intermediate_size > l.intermediate_size) {
    return InvalidError("moe_intermediate_size " + std::to_string(m.intermediate_size) +
                        " is not in [1, " + std::to_string(l.intermediate_size) + "]");
  }
  if (int64_t{m.num_experts} * c.num_layers > l.expert_layers) {
    return InvalidError("num_experts " + std::to_string(m.num_experts) + " on " +
                        std::to_string(c.num_layers) + " layers is over the limit of " +
                        std::to_string(l.expert_layers) + " expert layers");
  }
  return Status::Ok();
}

}  // namespace

Status CheckSupported(const ModelConfig& c) {
  if (c.head_dim <= 0 || c.head_dim % 2 != 0 || c.head_dim > kConfigLimits.head_dim) {
    return UnimplementedError("head_dim " + std::to_string(c.head_dim) +
                              " is not supported (even, at most " +
                              std::to_string(kConfigLimits.head_dim) + ")");
  }
  if (c.num_kv_heads <= 0 || c.num_heads % c.num_kv_heads != 0) {
    return InvalidError("num_attention_heads must be a multiple of num_key_value_heads");
  }
  return CheckMoe(c);
}

namespace {

// The folder's files located, config.json and tokenizer.json hashed.
Result<ModelInfo> LocateAndHashSmallFiles(const std::string& dir) {
  ModelInfo m;
  LOCKSTEP_ASSIGN_OR_RETURN(m.files, LocateModelFiles(dir));
  LOCKSTEP_ASSIGN_OR_RETURN(m.hashes, HashConfigAndTokenizer(m.files));
  return m;
}

// After the pins were checked: the config parsed (a GGUF file's from its
// header, `gguf` opened) and supported.
Status ParseConfig(ModelInfo& m, const Checkpoint* gguf = nullptr) {
  if (m.files.gguf) {
    m.config = *gguf->gguf_config();
  } else {
    LOCKSTEP_ASSIGN_OR_RETURN(m.config, LoadModelConfig(m.files.config_path));
  }
  LOCKSTEP_RETURN_IF_ERROR(CheckSupported(m.config).WithContext(m.files.config_path));
  m.table_digest = ops::TableDigest();
  m.inv_freq_table_digest = ops::InvFreqDigest(ModelInvFreq(m.config));
  return Status::Ok();
}

// The digests of the files a load read, checked against what the model
// already knew of them (an inspection) and recorded.
Status RecordWeightDigests(OpenModel& m, std::vector<FileDigest> read) {
  for (const FileDigest& d : read) {
    for (const FileDigest& known : m.hashes.weight_files) {
      if (known.file == d.file && known.sha256 != d.sha256) {
        return MismatchError(m.files.dir + "/" + d.file + ": sha256 " + ToHex(d.sha256) +
                             " while loading, " + ToHex(known.sha256) +
                             " when the folder was inspected: changed in between");
      }
    }
  }
  SetWeightDigests(m.hashes, std::move(read), *m.weights);
  return VerifyPins(m.hashes, m.pins, m.weights->file_names());
}

// The checkpoint of a located folder (or .gguf file), its config parsed
// (a GGUF file's from the same parse), a stage's filter applied. A GGUF
// file is parsed twice then, and both parses must have read the same
// header.
Status OpenCheckpoint(OpenModel& m, const StageSpec* stage) {
  std::unique_ptr<Checkpoint> whole;
  if (m.files.gguf) {
    LOCKSTEP_ASSIGN_OR_RETURN(Checkpoint c, Checkpoint::Open(m.files.weights_path));
    whole = std::make_unique<Checkpoint>(std::move(c));
  }
  LOCKSTEP_RETURN_IF_ERROR(ParseConfig(m, whole.get()));
  Checkpoint::Filter filter;
  if (stage != nullptr) {
    LOCKSTEP_RETURN_IF_ERROR(ValidateStageSpec(m.config, *stage));
    filter = StageTensorFilter(m.config, *stage);
  }
  if (whole != nullptr && !filter) {
    m.weights = std::move(whole);
    return Status::Ok();
  }
  LOCKSTEP_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(m.files.weights_path, filter));
  if (whole != nullptr && ckpt.gguf_header_sha256() != whole->gguf_header_sha256()) {
    return MismatchError(m.files.weights_path + ": its header changed while it was being opened");
  }
  m.weights = std::make_unique<Checkpoint>(std::move(ckpt));
  return Status::Ok();
}

}  // namespace

Result<ModelInfo> InspectModelDir(const std::string& dir, const ModelPins& pins) {
  LOCKSTEP_ASSIGN_OR_RETURN(ModelInfo m, LocateAndHashSmallFiles(dir));
  // Every weight file hashed, files in parallel; every pin checked at once.
  // A GGUF file's parts too, which a coordinator sends its stages.
  LOCKSTEP_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(m.files.weights_path));
  const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<FileDigest> digests,
                            ckpt.HashFiles(threads, Checkpoint::Parts::kAll));
  SetWeightDigests(m.hashes, std::move(digests), ckpt);
  LOCKSTEP_RETURN_IF_ERROR(VerifyPins(m.hashes, pins, ckpt.file_names()));
  LOCKSTEP_RETURN_IF_ERROR(ParseConfig(m, &ckpt));
  return m;
}

Result<OpenModel> MapWeights(ModelInfo info) {
  OpenModel m;
  static_cast<ModelInfo&>(m) = std::move(info);
  LOCKSTEP_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(m.files.weights_path));
  m.weights = std::make_unique<Checkpoint>(std::move(ckpt));
  return m;
}

Result<OpenModel> OpenModelDir(const std::string& dir, const ModelPins& pins,
                               const StageSpec* stage) {
  OpenModel m;
  LOCKSTEP_ASSIGN_OR_RETURN(static_cast<ModelInfo&>(m), LocateAndHashSmallFiles(dir));
  ModelPins small = pins;  // the weights' pins wait for their hashes (LoadStage)
  small.files.clear();
  small.weights.reset();
  LOCKSTEP_RETURN_IF_ERROR(VerifyPins(m.hashes, small));
  m.pins = pins;
  LOCKSTEP_RETURN_IF_ERROR(OpenCheckpoint(m, stage));
  return m;
}

Result<std::vector<FileDigest>> StageWeightFiles(const ModelInfo& model, const StageSpec& spec) {
  if (!model.files.sharded && !model.files.gguf) return std::vector<FileDigest>{};
  LOCKSTEP_ASSIGN_OR_RETURN(Checkpoint part, Checkpoint::Open(model.files.weights_path,
                                                              StageTensorFilter(model.config, spec)));
  std::vector<FileDigest> out;
  for (const std::string& name : part.digest_names()) {
    auto it = std::find_if(model.hashes.weight_files.begin(), model.hashes.weight_files.end(),
                           [&](const FileDigest& d) { return d.file == name; });
    if (it == model.hashes.weight_files.end()) {
      return InternalError(model.files.dir + "/" + name + ": not hashed when inspected");
    }
    out.push_back(*it);
  }
  return out;
}

Result<ModelBytes> MeasureModelBytes(const ModelFiles& files, const ModelConfig& config) {
  LOCKSTEP_ASSIGN_OR_RETURN(const Checkpoint ckpt, Checkpoint::Open(files.weights_path));
  return MeasureModelBytes(ckpt, config);
}

Status ValidateComputeOptions(const ComputeOptions& compute) {
  if (ops::KernelsByName(compute.isa) == nullptr) {
    return InvalidError("--isa " + compute.isa + " is unknown or not supported by this CPU");
  }
  if (compute.threads == 0) return InvalidError("--threads must be at least 1");
  return Status::Ok();
}

Result<LoadedStage> LoadStage(OpenModel& model, const StageSpec& spec,
                              const ComputeOptions& compute) {
  LOCKSTEP_RETURN_IF_ERROR(ValidateComputeOptions(compute));
  const ops::Kernels* kernels = ops::KernelsByName(compute.isa);
  LoadedStage out;
  if (compute.threads > 1) {
    LOCKSTEP_ASSIGN_OR_RETURN(out.pool, ops::ThreadPool::Create(compute.threads));
  }
  std::vector<FileDigest> read;
  WeightCacheUse cache{compute.weight_cache, {}};
  LOCKSTEP_ASSIGN_OR_RETURN(StageWeights w, LoadStageWeights(*model.weights, model.config, spec,
                                                             compute.weights,
                                                             static_cast<int>(compute.threads), &read,
                                                             &cache));
  out.weight_cache_note = std::move(cache.note);
  LOCKSTEP_RETURN_IF_ERROR(RecordWeightDigests(model, std::move(read)));
  out.stage = std::make_unique<Stage>(model.config, std::move(w), *kernels,
                                      StageOptions{out.pool.get()});
  return out;
}

}  // namespace lockstep
