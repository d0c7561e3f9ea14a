// `lockstep worker --listen ENDPOINT (--key FILE --allow PUB... | --insecure)`:
// the stage daemon (worker/worker.h). --key is this worker's key file
// (lockstep keygen); --allow a coordinator's public key file (repeatable):
// only those coordinators (and the upstream stages they assign) connect.
// --threads/--isa: how its stages compute (the same bits for every choice).
// --kv-budget BYTES: the KV cache memory all its sessions may hold
// (Limits::kv_bytes_per_worker); --memory-budget BYTES: the most weight
// bytes a stage assigned to it may hold (an Assign over it is refused
// before loading).
// Once bound it prints "lockstep worker listening on ENDPOINT" (port
// resolved) on stdout for people and, with --ready-fd N, writes one JSON
// line to descriptor N and closes it, for the process that started it:
//   {"endpoint":"tcp://127.0.0.1:PORT","curve_public":"<Z85 or empty>","pid":N}
// Exits on Shutdown from a coordinator or SIGTERM/SIGINT.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "base/limits.h"

namespace lockstep::cli {

struct WorkerCommandOptions {
  std::string listen;
  std::string name;
  std::string model_dir;  // overrides the folder named by the coordinator
  std::string key_file;
  std::vector<std::string> allow_files;
  bool insecure = false;
  std::string isa = "auto";
  std::string weight_cache;  // --weight-cache: ComputeOptions::weight_cache
  size_t threads = 1;
  int ready_fd = -1;  // -1: no readiness line
  uint64_t kv_budget = Limits{}.kv_bytes_per_worker;  // --kv-budget BYTES
  uint64_t memory_budget = 0;  // --memory-budget BYTES (Limits::weight_bytes_per_worker)
};

CLI::App* AddWorkerCommand(CLI::App& app, WorkerCommandOptions& opts);
int RunWorkerCommand(const WorkerCommandOptions& opts);

}  // namespace lockstep::cli
