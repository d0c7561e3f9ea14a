// `lockstep worker --listen ENDPOINT (--key FILE --allow PUB... | --insecure)`:
// the stage daemon (worker/worker.h). --key is this worker's key file
// (lockstep keygen); --allow a coordinator's public key file (repeatable):
// only those coordinators (and the upstream stages they assign) connect.
// Prints "lockstep worker listening on ENDPOINT" (port resolved) on stdout
// once bound; exits on Shutdown from a coordinator or SIGTERM/SIGINT.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

namespace lockstep::cli {

struct WorkerCommandOptions {
  std::string listen;
  std::string name;
  std::string model_dir;  // overrides the folder named by the coordinator
  std::string key_file;
  std::vector<std::string> allow_files;
  bool insecure = false;
};

CLI::App* AddWorkerCommand(CLI::App& app, WorkerCommandOptions& opts);
int RunWorkerCommand(const WorkerCommandOptions& opts);

}  // namespace lockstep::cli
