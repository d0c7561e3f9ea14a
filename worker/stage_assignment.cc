#include "worker/stage_assignment.h"

#include <fstream>
#include <sstream>

#include "base/limits.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/fp_env.h"
#include "engine/ops/kernels.h"
#include "engine/stage_bytes.h"
#include "engine/weights.h"

namespace lockstep::stage_assignment {
namespace {

// Mismatch naming the differing artifact, or Ok.
Status CompareHash(const char* what, const Digest& expected, const Digest& actual) {
  if (expected == actual) return Status::Ok();
  return MismatchError(std::string(what) + " differs: assigned " + ToHex(expected) +
                       ", this worker's file has " + ToHex(actual));
}

}  // namespace

std::string LayerRange(uint32_t lo, uint32_t hi) {
  return "[" + std::to_string(lo) + "," + std::to_string(hi) + ")";
}

bool SameStage(const wire::Assign& a, const wire::Assign& m) {
  return a.model_dir == m.model_dir && a.expected_weights_sha256 == m.expected_weights_sha256 &&
         a.expected_config_sha256 == m.expected_config_sha256 &&
         a.expected_tokenizer_sha256 == m.expected_tokenizer_sha256 &&
         a.layer_lo == m.layer_lo && a.layer_hi == m.layer_hi && a.is_first == m.is_first &&
         a.is_last == m.is_last && a.worker_index == m.worker_index;
}

Status EveryReadFileIsPinned(const Checkpoint& weights, const ModelPins& pins,
                             const std::string& dir) {
  for (const std::string& name : weights.digest_names()) {
    if (pins.files.count(name) == 0) {
      return MismatchError(dir + "/" + name +
                           ": this stage reads it, but the assignment gives no sha256 for it");
    }
  }
  return Status::Ok();
}

Status CheckWeightBudget(const Checkpoint& weights, const ModelConfig& config,
                         const StageSpec& spec, uint64_t budget, const std::string& worker) {
  LOCKSTEP_ASSIGN_OR_RETURN(const PartBytes need, MeasureStageBytes(weights, config, spec));
  return CheckLimit(ErrorKind::kInvalid, "weight_bytes_per_worker (--memory-budget)",
                    "the weights of layers " + LayerRange(static_cast<uint32_t>(spec.lo),
                                                          static_cast<uint32_t>(spec.hi)) +
                        " on worker " + worker,
                    need.resident, budget);
}

Result<Loaded> Load(const wire::Assign& m, const std::string& dir, const ComputeOptions& compute,
                    uint64_t weight_budget, const std::string& worker) {
  LOCKSTEP_RETURN_IF_ERROR(ops::PinFpEnvironment());
  const StageSpec spec{static_cast<int>(m.layer_lo), static_cast<int>(m.layer_hi), m.is_first,
                       m.is_last};
  // A sharded checkpoint is verified by parts: only the files holding this
  // stage's tensors are opened, and each must hash as the assignment says
  // (LoadStage refuses naming the file); a GGUF file likewise by its parts,
  // the header and this stage's tensors, the rest never read
  // (docs/spec_notes.md, "GGUF parts"). Otherwise every weight file is
  // hashed and reported.
  const bool by_parts = !m.weight_files.empty();
  ModelPins pins;
  pins.name = "the assignment";
  for (const wire::WeightFile& f : m.weight_files) pins.files[f.name] = f.sha256;
  LOCKSTEP_ASSIGN_OR_RETURN(OpenModel model, OpenModelDir(dir, pins, by_parts ? &spec : nullptr));
  LOCKSTEP_RETURN_IF_ERROR(ValidateStageSpec(model.config, spec));
  if (by_parts && !model.files.sharded && !model.files.gguf) {
    return InvalidError(dir + ": the assignment lists weight files of a sharded checkpoint, but " +
                        model.files.weights_path + " is a single file");
  }
  if (by_parts) LOCKSTEP_RETURN_IF_ERROR(EveryReadFileIsPinned(*model.weights, pins, dir));
  if (weight_budget > 0) {  // before a byte is loaded
    LOCKSTEP_RETURN_IF_ERROR(
        CheckWeightBudget(*model.weights, model.config, spec, weight_budget, worker));
  }
  if (!m.is_last && m.next_hop.empty()) return InvalidError("no next hop for a non-last stage");
  // The weights are hashed as they load; nothing is computed before the
  // digests are checked (CheckHashes, and by the coordinator from the Hello).
  Loaded loaded;
  LOCKSTEP_ASSIGN_OR_RETURN(loaded.stage, LoadStage(model, spec, compute));
  // Its parts verified, a GGUF file is the one the assignment names, whose
  // digest is also its config and tokenizer digest (E2.5).
  if (by_parts && model.files.gguf) {
    model.hashes.config = model.hashes.tokenizer = m.expected_weights_sha256;
  }
  wire::Hello& hello = loaded.hello;
  hello.worker_id = worker;
  hello.weights_sha256 = by_parts ? m.expected_weights_sha256 : model.hashes.weights;
  hello.config_sha256 = model.hashes.config;
  hello.tokenizer_sha256 = model.hashes.tokenizer;
  hello.table_digest = model.table_digest;
  hello.inv_freq_table_digest = model.inv_freq_table_digest;
  const ops::Kernels* kernels = ops::KernelsByName(compute.isa);
  hello.isa = ops::IsaName() + "/" + (kernels ? kernels->name : compute.isa);
  return loaded;  // `model` (and its mmap of the whole file) goes away here
}

Status CheckHashes(const wire::Assign& m, const wire::Hello& hello) {
  LOCKSTEP_RETURN_IF_ERROR(
      CompareHash("weights_sha256", m.expected_weights_sha256, hello.weights_sha256));
  LOCKSTEP_RETURN_IF_ERROR(
      CompareHash("config_sha256", m.expected_config_sha256, hello.config_sha256));
  return CompareHash("tokenizer_sha256", m.expected_tokenizer_sha256, hello.tokenizer_sha256);
}

void AppendLinksAndAck(const wire::Assign& m, std::vector<Outgoing>* out) {
  if (!m.is_last) {
    out->push_back(Outgoing{Outgoing::To::kConnectNext, {}, m.next_hop,
                            "stage " + std::to_string(m.worker_index + 1), false, 0});
  }
  if (m.is_last && !m.ring_hop.empty()) {
    out->push_back(Outgoing{Outgoing::To::kConnectRing, {}, m.ring_hop, "stage 0", false, 0});
  }
  const wire::AssignAck ack{m.worker_index, m.layer_lo, m.layer_hi, ResidentBytes()};
  out->push_back(
      Outgoing{Outgoing::To::kCoordinator, wire::MarshalMessage(ack), "", "", false, 0});
}

uint64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

}  // namespace lockstep::stage_assignment
