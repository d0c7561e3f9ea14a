// Decoding on a cluster of workers: through a running Coordinator
// (`lockstep coordinator`, `verify --config`), or on loopback worker
// processes spawned and reaped here (`lockstep run --workers K`,
// `verify --workers K`). Decodes go through DecodeChecked (the §12.4
// double run unless asked for one); the human notes and receipt stages
// describe the cluster that ran them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "coordinator/coordinator.h"
#include "engine/model_loader.h"
#include "receipt/receipt.h"
#include "runtime/checked_decode.h"
#include "runtime/worker_processes.h"

namespace lockstep::runtime {

// The sharded result with its measurements.
struct ClusterRun {
  DecodeResult result;
  double decode_ms_per_token = 0;   // mean over the single-token steps of run 1
  double wire_bytes_per_token = 0;  // coordinator <-> workers, per generated token
};

// A decode (RunDecode, or `decode`) through sessions of `coordinator`;
// runs: 2 (§12.4) or 1. window: overrides req.window when set.
// trace: every stage reports its layers' digests (DecodeResult::layer_digests).
Result<ClusterRun> RunOnCluster(Coordinator& coordinator, const DecodeRequest& req,
                                std::optional<int> window, int runs = 2, bool trace = false,
                                const Decoder& decode = {});

// The receipt's list of a cluster's stages (endpoint, layer range, pinned
// CURVE public key when the links are authenticated).
std::vector<receipt::WorkerEntry> ReceiptWorkers(const Coordinator& coordinator);

// Human-only notes: per-worker memory, latency and wire bytes.
std::vector<std::string> ClusterNotes(const Coordinator& coordinator, const ClusterRun& run);

struct LoopbackOptions {
  std::string model_dir;
  int workers = 0;            // K worker processes (0: one per range of `plan`)
  std::string plan;           // explicit layer ranges, e.g. "0:10,10:20" ("": automatic)
  std::optional<int> window;  // sliding window for every layer
  ComputeOptions compute;     // every worker's kernels and threads
  int runs = 2;               // 2: the §12.4 check; 1: decode once
  bool ship_logits = false;   // logits to the coordinator (ClusterConfig::ship_logits)
  bool trace = false;         // per-layer digests (RunOnCluster)
  PlanBalance plan_balance = PlanBalance::kMemory;  // what an automatic plan balances
  Decoder decode{};           // empty: RunDecode (checked_decode.h)
};

// A loopback run: its result and what the report shows of the cluster.
struct LoopbackRun {
  ClusterRun run;
  std::vector<std::string> notes;
  std::string plan;
  std::vector<receipt::WorkerEntry> stages;
};

// The one way a loopback cluster is started (`run --workers`, `serve
// --workers`, bench/pipeline, tests): spawn.count worker processes of
// spawn.exe (SelfExe() when empty), and `cfg` pointed at them (their
// endpoints, pinned keys and the coordinator's key). They live as long as
// the returned object.
Result<std::unique_ptr<WorkerProcesses>> SpawnLoopbackCluster(WorkerSpawnOptions spawn,
                                                              ClusterConfig* cfg);

// Validates the plan, spawns the workers (WorkerProcesses), decodes, shuts
// the workers down and reaps them.
Result<LoopbackRun> RunOnLoopback(const LoopbackOptions& o, const ModelInfo& model,
                                  const ModelPins& pins, const DecodeRequest& req);

}  // namespace lockstep::runtime
