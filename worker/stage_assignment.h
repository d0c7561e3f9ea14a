// Stage assignment: what a worker does with an Assign before it computes
// anything (StageHost applies it, worker/stage_host.h).
//   - SameStage: an Assign of the stage already loaded (same model folder,
//     hashes, layers, first/last and index) only re-wires it (how a
//     recovery re-wires the neighbours of a rebuilt stage); any other
//     loads afresh.
//   - Load: opens the model folder and refuses, before a byte of weights
//     is loaded: a layer range the model lacks; weight files listed for a
//     checkpoint that is one file; a file this stage reads that the
//     assignment gives no sha256 for (verifying by parts must cover every
//     one, or one left out would load unchecked); a stage whose tensors
//     take more than the weight budget (Limits::weight_bytes_per_worker,
//     as the checkpoint stores them, engine/stage_bytes.h; 0: none),
//     naming the limit and the worker; a non-last stage without a next
//     hop. It then loads the stage (hashing the weights as they load) and
//     builds the Hello that answers the Assign.
//   - CheckHashes: after the Hello is sent, Mismatch naming the first of
//     weights, config, tokenizer whose digest differs from the assigned one.
//   - AppendLinksAndAck: what follows an accepted Assign (a load or a
//     re-wire): the links to open — the next stage, and for the last stage
//     of two or more the first (relayed steps) — then the AssignAck.
// Stateless functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/io/checkpoint.h"
#include "engine/io/model_config.h"
#include "engine/io/model_files.h"
#include "engine/model_loader.h"
#include "engine/stage_tensors.h"
#include "wire/messages.h"
#include "worker/outgoing.h"

namespace lockstep::stage_assignment {

// "[lo,hi)".
std::string LayerRange(uint32_t lo, uint32_t hi);

// Whether `next` assigns exactly the stage `current` assigned.
bool SameStage(const wire::Assign& current, const wire::Assign& next);

// Mismatch unless every file `weights` reads has a pin in `pins`; `dir`
// names the folder.
Status EveryReadFileIsPinned(const Checkpoint& weights, const ModelPins& pins,
                             const std::string& dir);

// Invalid naming weight_bytes_per_worker and `worker` when the stage's
// tensors take more than `budget` bytes.
Status CheckWeightBudget(const Checkpoint& weights, const ModelConfig& config,
                         const StageSpec& spec, uint64_t budget, const std::string& worker);

// A loaded stage and the Hello answering its Assign.
struct Loaded {
  LoadedStage stage;
  wire::Hello hello;
};

// Loads Assign `m` from `dir` (the assigned folder or a host's override)
// for worker `worker` (as the file comment says). The model's files are
// released on return: only the stage's tensors stay resident.
Result<Loaded> Load(const wire::Assign& m, const std::string& dir, const ComputeOptions& compute,
                    uint64_t weight_budget, const std::string& worker);

// Ok when the Hello's digests are those `m` assigns.
Status CheckHashes(const wire::Assign& m, const wire::Hello& hello);

// Appends the links to open for `m`, then its AssignAck carrying the
// process's resident bytes.
void AppendLinksAndAck(const wire::Assign& m, std::vector<Outgoing>* out);

// The process's resident set size (VmRSS) in bytes; 0 if unreadable.
uint64_t ResidentBytes();

}  // namespace lockstep::stage_assignment
