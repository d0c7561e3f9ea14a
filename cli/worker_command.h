// `lockstep worker --listen ENDPOINT`: the stage daemon (worker/worker.h).
// Prints "lockstep worker listening on ENDPOINT" (port resolved) on stdout
// once bound; exits on Shutdown from a coordinator or SIGTERM/SIGINT.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lockstep::cli {

struct WorkerCommandOptions {
  std::string listen;
  std::string name;
  std::string model_dir;  // overrides the folder named by the coordinator
};

CLI::App* AddWorkerCommand(CLI::App& app, WorkerCommandOptions& opts);
int RunWorkerCommand(const WorkerCommandOptions& opts);

}  // namespace lockstep::cli
