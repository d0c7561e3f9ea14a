#include "cli/worker_command.h"

#include <signal.h>

#include <atomic>
#include <iostream>

#include "engine/ops/fp_env.h"
#include "keys/identity.h"
#include "worker/worker.h"

namespace lockstep::cli {
namespace {

// The one worker of this process, for the signal handler (a lock-free
// atomic store is async-signal-safe).
std::atomic<Worker*> g_worker{nullptr};

void OnSignal(int) {
  if (Worker* w = g_worker.load()) w->Stop();
}

Status LoadSecurity(const WorkerCommandOptions& o, wire::LinkSecurity* security) {
  if (o.insecure) {
    if (!o.key_file.empty() || !o.allow_files.empty()) {
      return InvalidError("--insecure contradicts --key/--allow: choose one");
    }
    security->insecure = true;
    return Status::Ok();
  }
  if (o.key_file.empty()) return InvalidError("give --key FILE (lockstep keygen) or --insecure");
  if (o.allow_files.empty()) {
    return InvalidError("give --allow PUB for each coordinator allowed to connect");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(keys::Identity id, keys::ReadIdentity(o.key_file));
  security->own = {id.pub.curve_public_z85, id.curve_secret_z85};
  for (const std::string& path : o.allow_files) {
    LOCKSTEP_ASSIGN_OR_RETURN(keys::PublicIdentity pub, keys::ReadPublicIdentity(path));
    security->allowed_clients_z85.push_back(pub.curve_public_z85);
  }
  return Status::Ok();
}

}  // namespace

CLI::App* AddWorkerCommand(CLI::App& app, WorkerCommandOptions& o) {
  CLI::App* cmd = app.add_subcommand("worker", "Serve pipeline stages for a coordinator");
  cmd->add_option("--listen", o.listen, "Endpoint to bind, e.g. tcp://0.0.0.0:5555 (port * = any)")
      ->required();
  cmd->add_option("--name", o.name, "Name used in messages (default worker@ENDPOINT)");
  cmd->add_option("--model", o.model_dir,
                  "Serve this model folder instead of the path the coordinator names");
  cmd->add_option("--key", o.key_file, "This worker's key file (lockstep keygen)");
  cmd->add_option("--allow", o.allow_files,
                  "Public key file of a coordinator allowed to connect (repeatable)");
  cmd->add_flag("--insecure", o.insecure,
                "Plaintext links, no authentication (instead of --key/--allow)");
  return cmd;
}

int RunWorkerCommand(const WorkerCommandOptions& o) {
  // §1.3 self-test on this thread; the compute thread repeats it in Run.
  if (const Status pin = ops::PinFpEnvironment(); !pin.ok()) {
    std::cerr << "lockstep worker: refusing to serve: " << pin.ToString() << "\n";
    return 1;
  }
  zmq::context_t context(1);
  WorkerOptions options;
  options.listen = o.listen;
  options.name = o.name;
  options.model_dir_override = o.model_dir;
  const Status security = LoadSecurity(o, &options.transport.security);
  if (!security.ok()) {
    std::cerr << "lockstep worker: " << security.ToString() << "\n";
    return 1;
  }
  Result<std::unique_ptr<Worker>> worker = Worker::Create(context, std::move(options));
  if (!worker.ok()) {
    std::cerr << "lockstep worker: " << worker.status().ToString() << "\n";
    return 1;
  }
  g_worker.store(worker->get());
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  signal(SIGPIPE, SIG_IGN);
  std::cout << "lockstep worker listening on " << (*worker)->endpoint() << std::endl;
  const Status st = (*worker)->Run();
  g_worker.store(nullptr);
  if (!st.ok()) {
    std::cerr << "lockstep worker: " << st.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace lockstep::cli
