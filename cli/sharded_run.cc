#include "cli/sharded_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "engine/local_backend.h"
#include "engine/ops/dispatch.h"
#include "engine/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
#include "keys/identity.h"

namespace lockstep::cli {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Times the single-token Feeds (decode steps) of a backend.
class TimedBackend final : public StepBackend {
 public:
  explicit TimedBackend(StepBackend& inner) : inner_(inner) {}
  Status Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) override {
    const auto start = Clock::now();
    Status st = inner_.Feed(tokens, logits);
    if (tokens.size() == 1) {
      total_ += std::chrono::duration<double, std::milli>(Clock::now() - start).count();
      steps_ += 1;
    }
    return st;
  }
  Status Evict(uint32_t from, uint32_t count) override { return inner_.Evict(from, count); }
  uint32_t CacheLength() const override { return inner_.CacheLength(); }
  double mean_ms() const { return steps_ ? total_ / steps_ : 0; }
  int steps() const { return steps_; }

 private:
  StepBackend& inner_;
  double total_ = 0;
  int steps_ = 0;
};

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string SelfExe() {
  std::error_code ec;
  const auto p = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("lockstep") : p.string();
}

}  // namespace

// ---- WorkerProcesses --------------------------------------------------------

Result<std::unique_ptr<WorkerProcesses>> WorkerProcesses::Spawn(const std::string& exe,
                                                                int count,
                                                                milliseconds ready_timeout,
                                                                const std::vector<std::string>& extra_allow) {
  std::unique_ptr<WorkerProcesses> p(new WorkerProcesses());
  LOCKSTEP_RETURN_IF_ERROR(p->MakeKeys(count));
  for (int i = 0; i < count; ++i) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::string endpoint, p->SpawnOne(exe, i, ready_timeout, extra_allow));
    p->endpoints_.push_back(std::move(endpoint));
  }
  return p;
}

Status WorkerProcesses::MakeKeys(int count) {
  char dir[] = "/tmp/lockstep-keys-XXXXXX";
  if (mkdtemp(dir) == nullptr) return IoError("mkdtemp: cannot make a private key directory");
  key_dir_ = dir;  // mkdtemp makes it 0700
  for (int i = -1; i < count; ++i) {
    LOCKSTEP_ASSIGN_OR_RETURN(keys::Identity id, keys::GenerateIdentity());
    const std::string path = i < 0 ? coordinator_key_file() : key_dir_ + "/w" + std::to_string(i);
    LOCKSTEP_RETURN_IF_ERROR(keys::WriteIdentity(id, path));
    if (i < 0) {
      coordinator_key_ = {id.pub.curve_public_z85, id.curve_secret_z85};
    } else {
      worker_keys_.push_back(id.pub.curve_public_z85);
    }
  }
  return Status::Ok();
}

std::vector<std::string> WorkerProcesses::worker_public_key_files() const {
  std::vector<std::string> files;
  for (size_t i = 0; i < worker_keys_.size(); ++i) {
    files.push_back(key_dir_ + "/w" + std::to_string(i) + ".pub");
  }
  return files;
}

void WorkerProcesses::ApplyTo(ClusterConfig* cfg) const {
  cfg->workers = endpoints_;
  cfg->insecure = false;
  cfg->key = coordinator_key_;
  cfg->worker_keys = worker_keys_;
}

Result<std::string> WorkerProcesses::SpawnOne(const std::string& exe, int index,
                                              milliseconds ready_timeout,
                                              const std::vector<std::string>& extra_allow) {
  // argv is built before fork: the child only calls async-signal-safe code.
  std::vector<std::string> args = {exe, "worker", "--listen", "tcp://127.0.0.1:*", "--key",
                                   key_dir_ + "/w" + std::to_string(index), "--allow",
                                   coordinator_key_file() + ".pub"};
  for (const std::string& a : extra_allow) {
    args.push_back("--allow");
    args.push_back(a);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return IoError("pipe: cannot spawn a worker");
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return IoError("fork: cannot spawn a worker");
  }
  if (pid == 0) {  // child: only async-signal-safe calls until exec
    dup2(fds[1], STDOUT_FILENO);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    execv(exe.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  children_.push_back(Child{pid, fds[0]});
  // The child prints "lockstep worker listening on ENDPOINT" once bound.
  std::string line;
  const auto deadline = Clock::now() + ready_timeout;
  while (line.find('\n') == std::string::npos) {
    const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now()).count();
    pollfd pfd{fds[0], POLLIN, 0};
    if (left <= 0 || poll(&pfd, 1, static_cast<int>(left)) <= 0) {
      return TimeoutError("worker process " + std::to_string(pid) + " (" + exe +
                          ") did not report its endpoint within " +
                          std::to_string(ready_timeout.count()) + " ms");
    }
    char buf[256];
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got <= 0) {
      return DisconnectedError("worker process " + std::to_string(pid) + " (" + exe +
                               ") exited before listening");
    }
    line.append(buf, static_cast<size_t>(got));
  }
  line.resize(line.find('\n'));
  const std::string marker = "listening on ";
  const size_t at = line.find(marker);
  if (at == std::string::npos) return InternalError("worker process printed '" + line + "'");
  return line.substr(at + marker.size());
}

void WorkerProcesses::Kill(size_t i) {
  Child& c = children_[i];
  if (c.pid <= 0) return;
  kill(c.pid, SIGKILL);
  waitpid(c.pid, nullptr, 0);
  c.pid = -1;
}

void WorkerProcesses::Reap(milliseconds grace) {
  const auto deadline = Clock::now() + grace;
  for (Child& c : children_) {
    while (c.pid > 0) {
      if (waitpid(c.pid, nullptr, WNOHANG) == c.pid) {
        c.pid = -1;
      } else if (Clock::now() >= deadline) {
        kill(c.pid, SIGKILL);
        waitpid(c.pid, nullptr, 0);
        c.pid = -1;
      } else {
        std::this_thread::sleep_for(milliseconds(10));
      }
    }
  }
}

WorkerProcesses::~WorkerProcesses() {
  for (size_t i = 0; i < children_.size(); ++i) Kill(i);
  for (Child& c : children_) {
    if (c.out_fd >= 0) close(c.out_fd);
  }
  if (!key_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(key_dir_, ec);
  }
}

// ---- decoding through a cluster ---------------------------------------------

Result<ClusterRun> RunOnCluster(Coordinator& coordinator, const DecodeRequest& req,
                                std::optional<int> window) {
  ClusterRun out;
  DecodeResult runs[2];
  for (int i = 0; i < 2; ++i) {  // §12.4: the whole decode twice
    LOCKSTEP_ASSIGN_OR_RETURN(auto session, coordinator.OpenSession(window));
    TimedBackend timed(*session);
    const WireStats before = coordinator.stats();
    LOCKSTEP_ASSIGN_OR_RETURN(runs[i], RunDecode(timed, req, coordinator.seed()));
    if (i == 0) {
      const WireStats after = coordinator.stats();
      out.decode_ms_per_token = timed.mean_ms();
      const double bytes = double(after.bytes_sent - before.bytes_sent) +
                           double(after.bytes_received - before.bytes_received);
      out.wire_bytes_per_token = bytes / std::max<uint32_t>(1, req.gen);
    }
  }
  if (runs[0].cis2_ref != runs[1].cis2_ref || runs[0].argmax_digest != runs[1].argmax_digest ||
      runs[0].generated != runs[1].generated) {
    return InternalError("determinism check (§12.4) failed: two sharded runs differ");
  }
  out.result = std::move(runs[0]);
  return out;
}

Result<std::pair<DecodeResult, double>> RunMonolithicTimed(const OpenModel& model,
                                                           const DecodeRequest& req,
                                                           std::optional<int> window) {
  const StageSpec all{0, model.config.num_layers, true, true};
  LOCKSTEP_ASSIGN_OR_RETURN(auto stage, LoadStage(model, all, ComputeOptions{}));
  LocalBackend backend(*stage);
  if (window) LOCKSTEP_RETURN_IF_ERROR(backend.SetWindow(*window));
  TimedBackend timed(backend);
  LOCKSTEP_ASSIGN_OR_RETURN(DecodeResult r, RunDecode(timed, req, model.Seed()));
  return std::make_pair(std::move(r), timed.mean_ms());
}

Status CompareResults(const DecodeResult& s, const DecodeResult& m) {
  std::string diff;
  if (s.generated != m.generated) diff += " generated_token_ids";
  if (s.argmax_digest != m.argmax_digest) diff += " argmax_digest";
  if (s.logits_sha256 != m.logits_sha256) diff += " per-step logits_sha256";
  if (s.cis2_ref != m.cis2_ref) {
    diff += " cis2_ref (sharded " + ToHex(s.cis2_ref) + ", monolithic " + ToHex(m.cis2_ref) + ")";
  }
  if (diff.empty()) return Status::Ok();
  return MismatchError("sharded != monolithic:" + diff);
}

std::vector<receipt::WorkerEntry> ReceiptWorkers(const Coordinator& c) {
  std::vector<receipt::WorkerEntry> out;
  for (const WorkerInfo& w : c.workers()) {
    out.push_back({w.endpoint, static_cast<uint32_t>(w.spec.lo), static_cast<uint32_t>(w.spec.hi), ""});
  }
  return out;
}

std::vector<std::string> ClusterNotes(const Coordinator& c, const ClusterRun& run) {
  std::vector<std::string> notes;
  for (const WorkerInfo& w : c.workers()) {
    notes.push_back("worker                = " + w.Describe() + " resident " +
                    Mib(w.resident_bytes));
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "decode_ms_per_token   = %.3f (sharded)", run.decode_ms_per_token);
  notes.push_back(buf);
  std::snprintf(buf, sizeof buf, "wire_bytes_per_token  = %.0f coordinator<->workers",
                run.wire_bytes_per_token);
  notes.push_back(buf);
  // Between stages each decode step carries one hidden frame of one row.
  wire::HiddenFrame one{1, 1, 1, 1, static_cast<uint32_t>(c.model_config().hidden_size), 1, {}};
  one.payload.assign(one.hidden, 0.0f);
  const size_t hops = c.workers().size() - 1;
  notes.push_back("stage_bytes_per_token = " + std::to_string(wire::MarshalHidden(one).size() * hops) +
                  " (" + std::to_string(hops) + " hidden frame(s) between stages)");
  return notes;
}

// ---- lockstep run --workers -------------------------------------------------

namespace {

Result<ClusterConfig> LoopbackConfig(const RunOptions& o, const ModelInfo& model,
                                     const ModelPins& pins) {
  ClusterConfig cfg;
  cfg.model_dir = std::filesystem::absolute(o.model_dir).string();
  cfg.pins = pins;
  size_t workers = o.workers > 0 ? static_cast<size_t>(o.workers) : 0;
  if (!o.plan.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(cfg.plan, ParsePlanText(o.plan));
    cfg.auto_plan = false;
    if (workers == 0) workers = cfg.plan.size();
  }
  if (o.workers < 0) return InvalidError("--workers must be at least 1");
  cfg.workers.assign(workers, "");
  // Validate before any worker process exists, let alone loads.
  LOCKSTEP_RETURN_IF_ERROR(ResolvePlan(cfg, model.config).status());
  cfg.request_timeout = milliseconds(600000);  // scalar kernels: long prefills
  return cfg;
}

}  // namespace

Result<LoopbackRun> RunOnLoopback(const RunOptions& o, const ModelInfo& model,
                                  const ModelPins& pins, const DecodeRequest& req) {
  LOCKSTEP_ASSIGN_OR_RETURN(ClusterConfig cfg, LoopbackConfig(o, model, pins));
  LOCKSTEP_ASSIGN_OR_RETURN(
      auto procs, WorkerProcesses::Spawn(SelfExe(), static_cast<int>(cfg.workers.size()),
                                         milliseconds(10000)));
  procs->ApplyTo(&cfg);
  zmq::context_t context(1);
  LoopbackRun out;
  {
    LOCKSTEP_ASSIGN_OR_RETURN(auto coordinator, Coordinator::Start(context, cfg, model));
    LOCKSTEP_ASSIGN_OR_RETURN(out.run, RunOnCluster(*coordinator, req, o.window));
    out.notes = ClusterNotes(*coordinator, out.run);
    out.plan = coordinator->plan_text();
    out.stages = ReceiptWorkers(*coordinator);
    coordinator->ShutdownWorkers("run finished");
  }  // the coordinator's I/O thread flushes the shutdown as it stops
  procs->Reap(milliseconds(2000));
  return out;
}

namespace {

Status RunSharded(const RunOptions& o) {
  LOCKSTEP_ASSIGN_OR_RETURN(auto signer, LoadSignKey(o.sign_key));
  LOCKSTEP_ASSIGN_OR_RETURN(ModelPins pins, ResolvePins(o.manifest, o.expect));
  LOCKSTEP_ASSIGN_OR_RETURN(ModelInfo model, InspectModelDir(o.model_dir, pins));
  LOCKSTEP_ASSIGN_OR_RETURN(DecodeRequest req,
                            BuildRequest(o, model.config.max_position_embeddings,
                                         model.files.tokenizer_path, model.files.has_tokenizer));
  LOCKSTEP_ASSIGN_OR_RETURN(LoopbackRun lr, RunOnLoopback(o, model, pins, req));
  ClusterRun& run = lr.run;
  std::vector<std::string>& notes = lr.notes;
  const std::string& plan = lr.plan;
  std::vector<receipt::WorkerEntry>& stages = lr.stages;
  if (o.compare_monolithic) {
    LOCKSTEP_ASSIGN_OR_RETURN(OpenModel mapped, MapWeights(model));
    LOCKSTEP_ASSIGN_OR_RETURN(auto mono, RunMonolithicTimed(mapped, req, o.window));
    LOCKSTEP_RETURN_IF_ERROR(CompareResults(run.result, mono.first));
    char buf[96];
    std::snprintf(buf, sizeof buf, "decode_ms_per_token   = %.3f (monolithic)", mono.second);
    notes.push_back(buf);
  }
  RunReport report{run.result, model.Seed(), DecodeText(model.files, run.result.generated), plan,
                   notes, o.compare_monolithic};
  report.window = o.window;
  report.evictions = req.evictions;
  report.sampling = req.sampling;
  report.workers = std::move(stages);
  report.timings = {{"decode_ms_per_token_sharded", run.decode_ms_per_token}};
  report.signer = signer ? &*signer : nullptr;
  return PrintReport(report, o.json, std::cout, o.receipt_path);
}

}  // namespace

int RunShardedCommand(const RunOptions& o) {
  Status st = RunSharded(o);
  if (!st.ok()) {
    std::cerr << "lockstep run: " << st.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace lockstep::cli
