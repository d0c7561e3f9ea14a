// `lockstep serve --model DIR [--listen HOST:PORT] [--threads N] ...`:
// the HTTP API (server/serve.h). Flag parsing only.
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
};

CLI::App* AddServeCommand(CLI::App& app, ServeCommandOptions& opts);
int RunServeCommand(ServeCommandOptions& opts);

}  // namespace lockstep::cli
