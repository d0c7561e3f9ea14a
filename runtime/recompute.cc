#include "runtime/recompute.h"

#include <chrono>
#include <zmq.hpp>

#include "base/limits.h"
#include "coordinator/coordinator.h"
#include "engine/teacher_forcing.h"
#include "runtime/cluster_run.h"
#include "runtime/local_run.h"

namespace lockstep::runtime {
namespace {

Status CheckSeed(const receipt::ParsedReceipt& r, const WitnessSeed& here) {
  if (r.seed.table_digest != here.table_digest) {
    return MismatchError("table_digest: receipt " + ToHex(r.seed.table_digest) + ", this build " +
                         ToHex(here.table_digest));
  }
  if (r.seed.inv_freq_table_digest != here.inv_freq_table_digest) {
    return MismatchError("inv_freq_table_digest: receipt " + ToHex(r.seed.inv_freq_table_digest) +
                         ", this model and build " + ToHex(here.inv_freq_table_digest));
  }
  return Status::Ok();
}

// The receipt's decode by teacher forcing its tokens (engine/teacher_forcing.h).
Decoder TeacherForcing(const receipt::ParsedReceipt& r, int vocab) {
  return [&r, vocab](StepBackend& backend, const DecodeRequest& req, const WitnessSeed& seed) {
    return TeacherForce(backend, req, r.generated, static_cast<uint32_t>(vocab), seed);
  };
}

}  // namespace

Result<Recomputed> RecomputeReceipt(const receipt::ParsedReceipt& r, const ModelPins& pins,
                                    const RecomputeOptions& o) {
  Recomputed out;
  const bool traced = !r.trace.empty();  // recompute the per-layer digests too
  DecodeRequest req;
  req.prompt = r.prompt;
  req.gen = r.gen;
  req.evictions = r.evictions;
  req.sampling = r.sampling;
  if (!o.config.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(ClusterConfig cfg, LoadClusterConfig(o.config));
    cfg.pins = pins;
    cfg.ship_logits = cfg.ship_logits || o.ship_logits;
    zmq::context_t context(1);
    LOCKSTEP_ASSIGN_OR_RETURN(auto coordinator, Coordinator::Start(context, cfg));
    LOCKSTEP_RETURN_IF_ERROR(CheckSeed(r, coordinator->seed()));
    req.max_positions = MaxPositions(Limits{}, coordinator->model_config().max_position_embeddings);
    LOCKSTEP_RETURN_IF_ERROR(ValidateDecodeRequest(req).WithContext("receipt"));
    const Decoder decode = TeacherForcing(r, coordinator->model_config().vocab_size);
    LOCKSTEP_ASSIGN_OR_RETURN(ClusterRun run,
                              RunOnCluster(*coordinator, req, r.window, 1, traced, decode));
    out.where = "cluster " + o.config + " (plan " + coordinator->plan_text() + ")";
    out.result = std::move(run.result);
    return out;
  }
  // Inspected first: the receipt's seed is checked before any weight loads.
  Result<OpenModel> opened = [&]() -> Result<OpenModel> {
    LOCKSTEP_ASSIGN_OR_RETURN(ModelInfo info, InspectModelDir(o.model_dir, pins));
    return MapWeights(std::move(info));
  }();
  if (!opened.ok()) {
    const Status st = opened.status();
    return st.kind() == ErrorKind::kMismatch
               ? MismatchError("wrong model: " + o.model_dir + " is not the receipt's model (" +
                               st.message() + ")")
               : st;
  }
  OpenModel& model = opened.value();
  LOCKSTEP_RETURN_IF_ERROR(CheckSeed(r, model.Seed()));
  req.max_positions = MaxPositions(Limits{}, model.config.max_position_embeddings);
  LOCKSTEP_RETURN_IF_ERROR(ValidateDecodeRequest(req).WithContext("receipt"));
  if (o.workers > 0) {
    LoopbackOptions lo;
    lo.model_dir = o.model_dir;
    lo.workers = o.workers;
    lo.runs = 1;  // as monolithically: the receipt is what the recomputation is compared with
    lo.window = r.window;
    lo.ship_logits = o.ship_logits;
    lo.compute = o.compute;
    lo.trace = traced;
    lo.decode = TeacherForcing(r, model.config.vocab_size);
    LOCKSTEP_ASSIGN_OR_RETURN(LoopbackRun lr, RunOnLoopback(lo, model, pins, req));
    out.where = std::to_string(o.workers) + " loopback workers (plan " + lr.plan + ")";
    out.result = std::move(lr.run.result);
    return out;
  }
  LocalRunOptions local;
  local.window = r.window;
  local.compute = o.compute;
  local.runs = 1;
  local.trace = traced;
  local.decode = TeacherForcing(r, model.config.vocab_size);
  LOCKSTEP_ASSIGN_OR_RETURN(TimedResult mono, RunMonolithic(model, req, local));
  out.where = "monolithic";
  out.decode_s = std::chrono::duration<double>(mono.finished - mono.started).count();
  out.result = std::move(mono.result);
  return out;
}

}  // namespace lockstep::runtime
