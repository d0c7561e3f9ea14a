// `lockstep serve --model DIR [--workers K | --config C.json]
// [--listen HOST:PORT] [--threads N] ...`: the HTTP API (server/serve.h),
// in-process, over K loopback worker processes spawned (and reaped) here,
// or over the running workers of a cluster config.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "server/serve.h"

namespace lockstep::cli {

struct ServeCommandOptions {
  server::ServeOptions serve;
  std::string listen = "127.0.0.1:8080";
  double kv_budget_mib = 2048;
  double prefix_cache_mib = 256;
  int workers = 0;          // > 0: that many loopback worker processes
  std::string config_path;  // a cluster config (workers already running)
  bool ship_logits = false;  // --ship-logits: logits to the coordinator
  std::string draft_model;   // --draft-model: speculative requests' proposals
};

CLI::App* AddServeCommand(CLI::App& app, ServeCommandOptions& opts);
int RunServeCommand(ServeCommandOptions& opts);

}  // namespace lockstep::cli
