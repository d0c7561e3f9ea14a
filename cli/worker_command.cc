#include "cli/worker_command.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli/exit_status.h"
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

// The readiness line (worker_command.h) on `fd`, which is then closed.
Status WriteReady(int fd, const std::string& endpoint, const std::string& curve_public) {
  const nlohmann::json j = {{"endpoint", endpoint}, {"curve_public", curve_public},
                            {"pid", static_cast<int64_t>(getpid())}};
  const std::string line = j.dump() + "\n";
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = write(fd, line.data() + done, line.size() - done);
    if (n <= 0) {
      close(fd);
      return IoError("--ready-fd " + std::to_string(fd) + ": cannot write the readiness line");
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return Status::Ok();
}

Status Serve(const WorkerCommandOptions& o) {
  // §1.3 self-test on this thread; the compute thread repeats it in Run.
  LOCKSTEP_RETURN_IF_ERROR(ops::PinFpEnvironment().WithContext("refusing to serve"));
  zmq::context_t context(1);
  WorkerOptions options;
  options.listen = o.listen;
  options.name = o.name;
  options.model_dir_override = o.model_dir;
  options.compute.isa = o.isa;
  options.compute.threads = o.threads;
  options.compute.weight_cache = o.weight_cache;
  options.limits.kv_bytes_per_worker = o.kv_budget;
  options.limits.weight_bytes_per_worker = o.memory_budget;
  LOCKSTEP_RETURN_IF_ERROR(LoadSecurity(o, &options.transport.security));
  const std::string curve_public = options.transport.security.own.public_z85;
  LOCKSTEP_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker,
                            Worker::Create(context, std::move(options)));
  g_worker.store(worker.get());
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  signal(SIGPIPE, SIG_IGN);
  std::cout << "lockstep worker listening on " << worker->endpoint() << std::endl;
  Status st = o.ready_fd >= 0 ? WriteReady(o.ready_fd, worker->endpoint(), curve_public)
                              : Status::Ok();
  if (st.ok()) st = worker->Run();
  g_worker.store(nullptr);
  return st;
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
  cmd->add_option("--isa", o.isa, "Kernels: scalar|avx2|avx512|neon|auto")->default_val("auto");
  cmd->add_option("--weight-cache", o.weight_cache,
                  "Keep this worker's packed weights in this directory and read them back on later "
                  "loads (verified against the checkpoint every time)");
  cmd->add_option("--threads", o.threads, "Compute threads per stage, including the compute thread")
      ->default_val(1)
      ->check(CLI::Range(1, 256));
  cmd->add_option("--kv-budget", o.kv_budget,
                  "KV cache bytes all sessions together may hold (default 4 GiB); a step or "
                  "fork past it is refused as Overloaded")
      ->check(CLI::Range(uint64_t{1}, UINT64_MAX));
  cmd->add_option("--memory-budget", o.memory_budget,
                  "Weight bytes an assigned stage may hold (as the checkpoint stores them); "
                  "an assignment over it is refused by name before loading (default: none)")
      ->check(CLI::Range(uint64_t{1}, UINT64_MAX));
  cmd->add_option("--ready-fd", o.ready_fd,
                  "Once bound, write one JSON line {endpoint, curve_public, pid} to this descriptor")
      ->check(CLI::Range(0, 1 << 20));
  return cmd;
}

int RunWorkerCommand(const WorkerCommandOptions& o) { return ExitStatus("worker", Serve(o)); }

}  // namespace lockstep::cli
