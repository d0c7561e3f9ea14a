// RunServer: `lockstep serve` — opens the model once, keeps its weights
// loaded, and serves the HTTP API (server/api.h) until SIGTERM/SIGINT,
// then shuts down gracefully (server/http_server.h) and returns Ok.
// In-process (monolithic): one Stage over every layer, batched by the
// Scheduler. Sharded (`cluster` set): a Coordinator over the cluster's
// workers (running already; the caller spawns loopback ones), which it
// asks to exit when the server stops. Readiness: one line "lockstep serve: listening on HOST:PORT"
// on stdout once the socket accepts connections.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/limits.h"
#include "base/status.h"
#include "coordinator/cluster_config.h"
#include "server/http_server.h"
#include "server/scheduler.h"

namespace lockstep::server {

struct ServeOptions {
  std::string model_dir;
  std::string model_name;  // "" -> the folder's base name
  HttpOptions http;
  size_t threads = 1;
  std::string isa = "auto";
  std::string weight_cache;  // ComputeOptions::weight_cache, in process and for local workers
  SchedulerOptions scheduler;
  Limits limits;  // max_positions (`--max-positions`) and max_prompt_tokens
  int shutdown_grace_ms = 10000;
  std::optional<ClusterConfig> cluster;  // its model_dir is model_dir
  // `--draft-model`: speculative requests take this draft's proposals
  // (scheduler.h); its stage outlives RunServer. Receipts then say
  // options.speculative "draft-model".
  DraftSource draft;
};

Status RunServer(const ServeOptions& options);

}  // namespace lockstep::server
