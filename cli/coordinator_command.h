// `lockstep coordinator --config FILE (--prompt T | --ids N,...) [--gen N]
// [--window W] [--evict F:C@S] [--json]`: decodes on already-running
// workers described by a cluster config (coordinator/cluster_config.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/run_command.h"

namespace lockstep::cli {

struct CoordinatorCommandOptions {
  std::string config;
  bool shutdown_workers = false;
  RunOptions run;  // prompt, ids, gen, window, evictions, json, speculative
};

CLI::App* AddCoordinatorCommand(CLI::App& app, CoordinatorCommandOptions& opts);
int RunCoordinatorCommand(const CoordinatorCommandOptions& opts);

}  // namespace lockstep::cli
