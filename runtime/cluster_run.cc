#include "runtime/cluster_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include <zmq.hpp>

#include "runtime/checked_decode.h"
#include "runtime/worker_processes.h"
#include "wire/hidden_frame.h"

namespace lockstep::runtime {
namespace {

using std::chrono::milliseconds;

std::string Mib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

Result<ClusterConfig> LoopbackConfig(const LoopbackOptions& o, const ModelInfo& model,
                                     const ModelPins& pins) {
  if (o.workers < 0) return InvalidError("--workers must be at least 1");
  LOCKSTEP_RETURN_IF_ERROR(ValidateComputeOptions(o.compute));  // before any process starts
  ClusterConfig cfg;
  cfg.model_dir = std::filesystem::absolute(o.model_dir).string();
  cfg.pins = pins;
  size_t workers = static_cast<size_t>(o.workers);
  if (!o.plan.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(cfg.plan, ParsePlanText(o.plan));
    cfg.auto_plan = false;
    if (workers == 0) workers = cfg.plan.size();
  }
  cfg.workers.assign(workers, "");
  cfg.plan_balance = o.plan_balance;
  // Validate before any worker process exists, let alone loads.
  LOCKSTEP_RETURN_IF_ERROR(ResolvePlan(cfg, model).status());
  cfg.request_timeout = milliseconds(600000);  // scalar kernels: long prefills
  cfg.ship_logits = o.ship_logits;
  return cfg;
}

}  // namespace

Result<ClusterRun> RunOnCluster(Coordinator& coordinator, const DecodeRequest& req,
                                std::optional<int> window, int runs, bool trace,
                                const Decoder& decode) {
  if (!window) window = req.window;  // the request's own, unless overridden
  const BackendFactory open = [&]() -> Result<std::unique_ptr<StepBackend>> {
    const uint32_t reserve =
        static_cast<uint32_t>(std::min<uint64_t>(req.prompt.size() + req.gen, UINT32_MAX));
    LOCKSTEP_ASSIGN_OR_RETURN(auto session,
                              coordinator.OpenSession(window, req.sampling, trace, reserve));
    return std::unique_ptr<StepBackend>(std::move(session));
  };
  const WireStats before = coordinator.stats();
  LOCKSTEP_ASSIGN_OR_RETURN(TimedResult decoded, DecodeChecked(open, req, coordinator.seed(), runs, decode));
  const WireStats after = coordinator.stats();
  ClusterRun out;
  out.result = std::move(decoded.result);
  out.decode_ms_per_token = decoded.decode_ms_per_token;
  const double bytes = double(after.bytes_sent - before.bytes_sent) +
                       double(after.bytes_received - before.bytes_received);
  out.wire_bytes_per_token = bytes / runs / std::max<uint32_t>(1, req.gen);
  return out;
}

std::vector<receipt::WorkerEntry> ReceiptWorkers(const Coordinator& c) {
  std::vector<receipt::WorkerEntry> out;
  for (const WorkerInfo& w : c.workers()) {
    out.push_back({w.endpoint, static_cast<uint32_t>(w.spec.lo), static_cast<uint32_t>(w.spec.hi),
                   w.curve_public});
  }
  return out;
}

std::vector<std::string> ClusterNotes(const Coordinator& c, const ClusterRun& run) {
  std::vector<std::string> notes;
  // What each stage's weights take as stored, and what a token reads of them.
  const Result<ModelBytes> bytes = MeasureModelBytes(c.model_files(), c.model_config());
  for (const WorkerInfo& w : c.workers()) {
    std::string weights;
    if (bytes.ok()) {
      const PartBytes b = bytes->Stage(w.spec);
      weights = " weights " + Mib(b.resident) + " (" + Mib(b.per_token) + " per token)";
    }
    notes.push_back("worker                = " + w.Describe() + weights + " resident " +
                    Mib(w.resident_bytes));
  }
  char buf[160];
  std::snprintf(buf, sizeof buf, "decode_ms_per_token   = %.3f (sharded)", run.decode_ms_per_token);
  notes.push_back(buf);
  std::snprintf(buf, sizeof buf, "wire_bytes_per_token  = %.0f coordinator<->workers",
                run.wire_bytes_per_token);
  notes.push_back(buf);
  // Between stages each decode step carries one hidden frame of one row.
  wire::HiddenFrame one;
  one.seq = 1;
  one.hidden = static_cast<uint32_t>(c.model_config().hidden_size);
  one.resume_layer = 1;
  one.session_id = 1;
  one.step = 1;
  one.first_position = 1;
  one.payload.assign(one.hidden, 0.0f);
  if (!c.ship_logits()) one.handoff = wire::ChainHandoff{};  // the chain rides along
  const size_t hops = c.workers().size() - 1;
  notes.push_back("stage_bytes_per_token = " + std::to_string(wire::MarshalHidden(one).size() * hops) +
                  " (" + std::to_string(hops) + " hidden frame(s) between stages)");
  return notes;
}

Result<std::unique_ptr<WorkerProcesses>> SpawnLoopbackCluster(WorkerSpawnOptions spawn,
                                                              ClusterConfig* cfg) {
  if (spawn.exe.empty()) spawn.exe = SelfExe();
  LOCKSTEP_ASSIGN_OR_RETURN(auto procs, WorkerProcesses::Spawn(spawn));
  procs->ApplyTo(cfg);
  return procs;
}

Result<LoopbackRun> RunOnLoopback(const LoopbackOptions& o, const ModelInfo& model,
                                  const ModelPins& pins, const DecodeRequest& req) {
  LOCKSTEP_ASSIGN_OR_RETURN(ClusterConfig cfg, LoopbackConfig(o, model, pins));
  WorkerSpawnOptions spawn;
  spawn.count = static_cast<int>(cfg.workers.size());
  spawn.compute = o.compute;
  LOCKSTEP_ASSIGN_OR_RETURN(auto procs, SpawnLoopbackCluster(spawn, &cfg));
  zmq::context_t context(1);
  LoopbackRun out;
  {
    LOCKSTEP_ASSIGN_OR_RETURN(auto coordinator, Coordinator::Start(context, cfg, model));
    LOCKSTEP_ASSIGN_OR_RETURN(out.run, RunOnCluster(*coordinator, req, o.window, o.runs, o.trace, o.decode));
    out.notes = ClusterNotes(*coordinator, out.run);
    out.plan = coordinator->plan_text();
    out.stages = ReceiptWorkers(*coordinator);
    coordinator->ShutdownWorkers("run finished");
  }  // the coordinator's I/O thread flushes the shutdown as it stops
  procs->Reap(milliseconds(2000));
  return out;
}

}  // namespace lockstep::runtime
