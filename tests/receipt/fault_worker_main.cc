// lockstep_fault_worker: `lockstep worker` over lockstep_worker_fault, the
// worker library compiled with LOCKSTEP_FAULT_INJECTION (worker/bit_flip.h).
// Test builds only; takes the same `worker ...` arguments, so
// runtime::WorkerProcesses can spawn it.
#include <CLI/CLI.hpp>

#include "cli/worker_command.h"

int main(int argc, char** argv) {
  CLI::App app{"lockstep worker with test-only fault injection (LOCKSTEP_FAULT_FLIP)"};
  app.require_subcommand(1);
  lockstep::cli::WorkerCommandOptions o;
  lockstep::cli::AddWorkerCommand(app, o);
  CLI11_PARSE(app, argc, argv);
  return lockstep::cli::RunWorkerCommand(o);
}
