// WorkerProcesses: child `lockstep worker` processes listening on unix
// sockets (ipc://DIR/wN.sock in the private key directory below), for
// loopback clusters (`run --workers K`, `serve --workers K`,
// `verify --workers K`, tests).
//
// Readiness is structured: each child is started with `--ready-fd 3` and,
// once bound, writes one JSON line there:
//   {"endpoint":"ipc://DIR/wN.sock","curve_public":"<Z85>","pid":N}
// Spawn checks that the endpoint is the one the child was given, the key
// the one made for that child and the pid the child's; the child's human
// log line ("listening on") is not parsed.
// The children's stdout goes to /dev/null, their stderr is this process's.
//
// Children die with the parent (PR_SET_PDEATHSIG) and are killed and
// reaped by the destructor: no orphans on any path. Links are CURVE with
// ephemeral keys made by Spawn in a private directory (mode 0700, removed
// by the destructor); each child accepts only that coordinator key.
// Thread-compatible.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "coordinator/cluster_config.h"
#include "engine/model_loader.h"
#include "wire/link_security.h"

namespace lockstep::runtime {

// The running lockstep binary (/proc/self/exe), or "lockstep" if unknown.
std::string SelfExe();

struct WorkerSpawnOptions {
  std::string exe;  // the lockstep binary
  int count = 1;
  // More workers, held in reserve: ApplyTo lists them as the config's
  // "spares" (a dead stage is rebuilt on them).
  int spares = 0;
  // Each worker computes with these kernels and threads (`--isa`,
  // `--threads`) and keeps its weight cache in compute.weight_cache, if
  // set (`--weight-cache`); the weight format is the worker's default.
  ComputeOptions compute;
  // Timeout if a child has not reported readiness by then.
  std::chrono::milliseconds ready_timeout{10000};
  std::vector<std::string> extra_allow;  // more public key files every child accepts (tests)
};

class WorkerProcesses {
 public:
  static Result<std::unique_ptr<WorkerProcesses>> Spawn(const WorkerSpawnOptions& options);
  ~WorkerProcesses();
  WorkerProcesses(const WorkerProcesses&) = delete;
  WorkerProcesses& operator=(const WorkerProcesses&) = delete;

  // Every child's endpoint: the `count` workers, then the spares.
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  // Sets cfg's workers, its coordinator key, the pinned worker keys and
  // the spares.
  void ApplyTo(ClusterConfig* cfg) const;
  // The key files, for a cluster config file: the coordinator's secret key
  // file and each worker's public key file.
  std::string coordinator_key_file() const { return key_dir_ + "/coordinator"; }
  std::vector<std::string> worker_public_key_files() const;
  pid_t pid(size_t i) const { return children_[i]; }
  // SIGKILLs child i now (fault injection and error paths).
  void Kill(size_t i);
  // Kills child i if it runs and starts a fresh one on the same endpoint
  // with the same key (a worker restarted on its address).
  Status Restart(size_t i);
  // Waits up to `grace` for every child to exit by itself, then kills the rest.
  void Reap(std::chrono::milliseconds grace);

 private:
  WorkerProcesses() = default;
  Status MakeKeys(int count);
  std::vector<std::string> Args(const WorkerSpawnOptions& o, int index,
                                const std::string& listen) const;
  // Starts child `index` listening on `listen`; sets children_[index].
  Result<std::string> SpawnOne(const WorkerSpawnOptions& o, int index,
                               const std::string& listen);

  WorkerSpawnOptions options_;
  std::vector<pid_t> children_;  // -1 once reaped
  std::vector<std::string> endpoints_;
  std::string key_dir_;
  wire::CurveKeyPair coordinator_key_;
  std::vector<std::string> worker_keys_;  // Z85 public keys
};

}  // namespace lockstep::runtime
