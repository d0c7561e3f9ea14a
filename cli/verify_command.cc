#include "cli/verify_command.h"

#include <iostream>

#include "base/limits.h"
#include "cli/exit_status.h"
#include "engine/model_loader.h"
#include "runtime/cluster_run.h"
#include "runtime/local_run.h"
#include "keys/identity.h"
#include "receipt/receipt.h"

namespace lockstep::cli {
namespace {

using nlohmann::json;

Result<keys::Ed25519Public> TrustedKey(const std::string& trust) {
  if (trust.size() == 64 && trust.find('/') == std::string::npos) {
    if (auto hex = keys::ParseSignPublicHex(trust); hex.ok()) return *hex;
  }
  LOCKSTEP_ASSIGN_OR_RETURN(keys::PublicIdentity pub, keys::ReadPublicIdentity(trust));
  return pub.sign_public;
}

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

// Recomputes the receipt's decode; `where` says how, for the report.
Result<DecodeResult> Recompute(const VerifyOptions& o, const receipt::ParsedReceipt& r,
                               const ModelPins& pins, std::string* where) {
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
    LOCKSTEP_ASSIGN_OR_RETURN(runtime::ClusterRun run,
                              runtime::RunOnCluster(*coordinator, req, r.window));
    *where = "cluster " + o.config + " (plan " + coordinator->plan_text() + ")";
    return run.result;
  }
  Result<OpenModel> opened = OpenModelDir(o.model_dir, pins);
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
    runtime::LoopbackOptions lo;
    lo.model_dir = o.model_dir;
    lo.workers = o.workers;
    lo.window = r.window;
    lo.ship_logits = o.ship_logits;
    LOCKSTEP_ASSIGN_OR_RETURN(runtime::LoopbackRun lr, runtime::RunOnLoopback(lo, model, pins, req));
    *where = std::to_string(o.workers) + " loopback workers (plan " + lr.plan + ")";
    return lr.run.result;
  }
  runtime::LocalRunOptions local;
  local.window = r.window;
  LOCKSTEP_ASSIGN_OR_RETURN(runtime::TimedResult mono, runtime::RunMonolithic(model, req, local));
  *where = "monolithic";
  return mono.result;
}

// Ok = verified; Mismatch = a difference (message says which); other = error.
Status Verify(const VerifyOptions& o) {
  LOCKSTEP_ASSIGN_OR_RETURN(json j, receipt::ReadReceiptFile(o.receipt_path));
  if (!o.trust.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(keys::Ed25519Public trusted, TrustedKey(o.trust));
    LOCKSTEP_RETURN_IF_ERROR(receipt::CheckSignature(j, trusted));
    std::cout << "signature             = valid, by the trusted key\n";
  } else if (j.contains("signature")) {
    LOCKSTEP_RETURN_IF_ERROR(receipt::CheckSignature(j, std::nullopt));
    std::cout << "signature             = valid, by " << j["signature"].value("public_key", "")
              << " (not checked against a trusted key: pass --trust)\n";
  } else {
    std::cout << "signature             = none\n";
  }
  LOCKSTEP_ASSIGN_OR_RETURN(receipt::ParsedReceipt r, receipt::ParseReceipt(j));
  ModelPins pins;
  pins.weights = r.seed.weights_sha256;
  pins.tokenizer = r.seed.tokenizer_sha256;
  pins.config = r.seed.config_sha256;
  pins.name = o.receipt_path;
  std::string where;
  LOCKSTEP_ASSIGN_OR_RETURN(DecodeResult again, Recompute(o, r, pins, &where));
  std::cout << "artifacts             = match the receipt\n"
            << "recomputed            = " << where << ", " << again.generated.size() << " steps\n";
  if (auto d = receipt::FirstDivergence(r, again)) return MismatchError(d->what);
  return Status::Ok();
}

}  // namespace

CLI::App* AddVerifyCommand(CLI::App& app, VerifyOptions& o) {
  CLI::App* c = app.add_subcommand("verify", "Check a receipt: signature, artifacts, recomputation");
  c->add_option("receipt", o.receipt_path, "Receipt file (run/coordinator --receipt, or --json output)")
      ->required();
  c->add_option("--model", o.model_dir, "Model folder to recompute with");
  auto* workers = c->add_option("--workers", o.workers, "Recompute on K loopback worker processes");
  auto* config = c->add_option("--config", o.config, "Recompute on the cluster of this config");
  workers->excludes(config);
  c->add_flag("--ship-logits", o.ship_logits, "Send every step's logits to the coordinator, which chooses the token (same digests)");
  c->add_option("--trust", o.trust, "Require a signature by this key (.pub file or 64 hex)");
  return c;
}

int RunVerifyCommand(const VerifyOptions& o) {
  Status st;
  if (o.model_dir.empty() && o.config.empty()) {
    st = InvalidError("give --model DIR (or --config C.json)");
  } else if (o.workers < 0) {
    st = InvalidError("--workers must be at least 1");
  } else {
    st = Verify(o);
  }
  if (st.ok()) std::cout << "VERIFIED\n";
  if (st.kind() != ErrorKind::kMismatch) return ExitStatus("verify", st);
  std::cout << "DIFFERS: " << st.message() << "\n";
  return 1;
}

}  // namespace lockstep::cli
