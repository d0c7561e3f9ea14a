// lockstep: bit-exact CIS-2 decode, monolithic or split across workers.
#include <CLI/CLI.hpp>

#include "cli/bench_command.h"
#include "cli/coordinator_command.h"
#include "cli/exit_status.h"
#include "cli/keygen_command.h"
#include "cli/make_model_command.h"
#include "cli/run_command.h"
#include "cli/selftest_command.h"
#include "cli/verify_command.h"
#include "cli/serve_command.h"
#include "cli/worker_command.h"
#include "engine/ops/fp_env.h"

int main(int argc, char** argv) {
  using namespace lockstep;
  CLI::App app{"lockstep: bit-exact distributed inference (CIS-2 v0.3b)"};
  app.require_subcommand(1);
  cli::RunOptions run_opts;
  cli::MakeModelOptions make_opts;
  cli::BenchOptions bench_opts;
  cli::WorkerCommandOptions worker_opts;
  cli::CoordinatorCommandOptions coordinator_opts;
  cli::KeygenOptions keygen_opts;
  cli::VerifyOptions verify_opts;
  cli::ServeCommandOptions serve_opts;
  CLI::App* run = cli::AddRunCommand(app, run_opts);
  CLI::App* selftest = cli::AddSelftestCommand(app);
  CLI::App* make = cli::AddMakeModelCommand(app, make_opts);
  CLI::App* bench = cli::AddBenchCommand(app, bench_opts);
  CLI::App* worker = cli::AddWorkerCommand(app, worker_opts);
  CLI::App* coordinator = cli::AddCoordinatorCommand(app, coordinator_opts);
  CLI::App* keygen = cli::AddKeygenCommand(app, keygen_opts);
  CLI::App* verify = cli::AddVerifyCommand(app, verify_opts);
  CLI::App* serve = cli::AddServeCommand(app, serve_opts);
  CLI11_PARSE(app, argc, argv);

  // §1.3: before any decode arithmetic, in this (the computing) thread.
  if (const Status pin = ops::PinFpEnvironment(); !pin.ok() && !selftest->parsed()) {
    return cli::ExitStatus(app.get_subcommands().front()->get_name(), pin);
  }
  if (run->parsed()) return cli::RunRunCommand(run_opts);
  if (selftest->parsed()) return cli::RunSelftestCommand();
  if (make->parsed()) return cli::RunMakeModelCommand(make_opts);
  if (bench->parsed()) return cli::RunBenchCommand(bench_opts);
  if (worker->parsed()) return cli::RunWorkerCommand(worker_opts);
  if (verify->parsed()) return cli::RunVerifyCommand(verify_opts);
  if (keygen->parsed()) return cli::RunKeygenCommand(keygen_opts);
  if (coordinator->parsed()) return cli::RunCoordinatorCommand(coordinator_opts);
  if (serve->parsed()) return cli::RunServeCommand(serve_opts);
  return 1;
}
