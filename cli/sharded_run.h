// Sharded runs: `lockstep run --workers K` (loopback: spawns K local
// `lockstep worker` processes) and `lockstep coordinator --config` (workers
// already running). Both decode through a Coordinator with RunDecode,
// twice (§12.4), and print the same report as a monolithic run.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "cli/report.h"
#include "cli/run_command.h"
#include "coordinator/coordinator.h"

namespace lockstep::cli {

// Child `lockstep worker` processes listening on 127.0.0.1 ephemeral ports
// (each child binds port 0 and prints the port it got, so ports never
// collide). Children die with the parent (PR_SET_PDEATHSIG) and are killed
// and reaped by the destructor: no orphans on any path. Thread-compatible.
//
// Links are CURVE with ephemeral keys: Spawn generates a key for each
// worker and one coordinator key in a private directory (mode 0700,
// removed by the destructor); each child accepts only that coordinator.
class WorkerProcesses {
 public:
  // `exe`: the lockstep binary. Timeout if a child does not report its
  // endpoint within `ready_timeout`.
  // `extra_allow`: more public key files every child accepts (tests).
  static Result<std::unique_ptr<WorkerProcesses>> Spawn(
      const std::string& exe, int count, std::chrono::milliseconds ready_timeout,
      const std::vector<std::string>& extra_allow = {});
  ~WorkerProcesses();
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;

  const std::vector<std::string>& endpoints() const { return endpoints_; }
  // Sets cfg's workers, its coordinator key and the pinned worker keys.
  void ApplyTo(ClusterConfig* cfg) const;
  // The key files, for a cluster config file: the coordinator's secret key
  // file and each worker's public key file.
  std::string coordinator_key_file() const { return key_dir_ + "/coordinator"; }
  std::vector<std::string> worker_public_key_files() const;
  pid_t pid(size_t i) const { return children_[i].pid; }
  // SIGKILLs child i now (fault injection and error paths).
  void Kill(size_t i);
  // Waits up to `grace` for every child to exit by itself, then kills the rest.
  void Reap(std::chrono::milliseconds grace);

 private:
  struct Child {
    pid_t pid = -1;
    int out_fd = -1;  // the child's stdout
  };
  WorkerProcesses() = default;
  Status MakeKeys(int count);
  Result<std::string> SpawnOne(const std::string& exe, int index,
                               std::chrono::milliseconds ready_timeout,
                               const std::vector<std::string>& extra_allow);

  std::vector<Child> children_;
  std::vector<std::string> endpoints_;
  std::string key_dir_;
  wire::CurveKeyPair coordinator_key_;
  std::vector<std::string> worker_keys_;  // Z85 public keys
};

// The sharded result of RunOnCluster, with its measurements.
struct ClusterRun {
  DecodeResult result;
  double decode_ms_per_token = 0;  // mean over the single-token steps of run 1
  double wire_bytes_per_token = 0;  // coordinator <-> workers, per decode step
};

// RunDecode through `coordinator` twice with the §12.4 check.
Result<ClusterRun> RunOnCluster(Coordinator& coordinator, const DecodeRequest& req,
                                std::optional<int> window);

// Mean wall time of single-token Feeds of a monolithic decode (and its result).
Result<std::pair<DecodeResult, double>> RunMonolithicTimed(const OpenModel& model,
                                                           const DecodeRequest& req,
                                                           std::optional<int> window);

// Ok when every digest and token of `a` equals `b`'s; else Mismatch naming what differs.
Status CompareResults(const DecodeResult& sharded, const DecodeResult& monolithic);

// The receipt's list of a cluster's stages (endpoint, layer range).
std::vector<receipt::WorkerEntry> ReceiptWorkers(const Coordinator& coordinator);

// Human-only notes: per-worker memory, latency and wire bytes.
std::vector<std::string> ClusterNotes(const Coordinator& coordinator, const ClusterRun& run);

// A decode on `o.workers` loopback worker processes (or `o.plan`), spawned
// and reaped here.
struct LoopbackRun {
  ClusterRun run;
  std::vector<std::string> notes;
  std::string plan;
  std::vector<receipt::WorkerEntry> stages;
};
Result<LoopbackRun> RunOnLoopback(const RunOptions& o, const ModelInfo& model,
                                  const ModelPins& pins, const DecodeRequest& req);

// `lockstep run --workers/--plan`: returns the process exit code.
int RunShardedCommand(const RunOptions& opts);

}  // namespace lockstep::cli
