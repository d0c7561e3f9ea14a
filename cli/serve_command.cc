#include "cli/serve_command.h"

#include <charconv>
#include <iostream>

#include "cli/exit_status.h"
#include "cli/speculative_option.h"
#include "coordinator/cluster_config.h"
#include "runtime/cluster_run.h"

namespace lockstep::cli {
namespace {

Status ParseListen(const std::string& text, server::HttpOptions* http) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidError("--listen expects HOST:PORT, got '" + text + "'");
  }
  unsigned port = 0;
  const std::string_view p = std::string_view(text).substr(colon + 1);
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), port);
  if (ec != std::errc() || end != p.data() + p.size() || port > 65535) {
    return InvalidError("--listen: port '" + std::string(p) + "' is not in 0..65535");
  }
  http->host = text.substr(0, colon);
  http->port = static_cast<uint16_t>(port);
  return Status::Ok();
}

// The --draft-model, checked against the served model's tokenizer, in
// o.serve.draft (null when none was asked for).
Result<std::unique_ptr<DraftModel>> LoadServeDraft(ServeCommandOptions& o) {
  if (o.draft_model.empty()) return std::unique_ptr<DraftModel>();
  LOCKSTEP_ASSIGN_OR_RETURN(const OpenModel target, OpenModelDir(o.serve.model_dir, ModelPins{}));
  const ComputeOptions compute{o.serve.isa, o.serve.threads, WeightFormat::kPackedBf16, ""};
  LOCKSTEP_ASSIGN_OR_RETURN(
      std::unique_ptr<DraftModel> draft,
      LoadDraftModel(o.draft_model, TargetTokenizer(target), compute));
  o.serve.draft = server::DraftSource{draft->stage.stage.get(), draft->max_positions};
  return draft;
}

// Serves over loopback workers or a configured cluster, or in-process.
Status Serve(ServeCommandOptions& o) {
  LOCKSTEP_ASSIGN_OR_RETURN(const std::unique_ptr<DraftModel> draft, LoadServeDraft(o));
  if (!o.config_path.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(ClusterConfig cfg, LoadClusterConfig(o.config_path));
    if (o.serve.model_dir != cfg.model_dir) {
      return InvalidError("--model " + o.serve.model_dir + " is not the model of " +
                          o.config_path + " (" + cfg.model_dir + ")");
    }
    cfg.ship_logits = cfg.ship_logits || o.ship_logits;
    o.serve.cluster = std::move(cfg);
    return server::RunServer(o.serve);
  }
  if (o.workers == 0) return server::RunServer(o.serve);
  runtime::WorkerSpawnOptions spawn;
  spawn.count = o.workers;
  spawn.compute = {o.serve.isa, o.serve.threads, WeightFormat::kPackedBf16,
                   o.serve.weight_cache};  // the workers compute, with these
  ClusterConfig cfg;
  cfg.model_dir = o.serve.model_dir;
  LOCKSTEP_ASSIGN_OR_RETURN(auto procs, runtime::SpawnLoopbackCluster(spawn, &cfg));
  cfg.ship_logits = o.ship_logits;
  o.serve.cluster = std::move(cfg);
  const Status st = server::RunServer(o.serve);
  procs->Reap(std::chrono::milliseconds(2000));
  return st;
}

}  // namespace

CLI::App* AddServeCommand(CLI::App& app, ServeCommandOptions& o) {
  CLI::App* c = app.add_subcommand("serve", "OpenAI-compatible HTTP API with receipts");
  server::ServeOptions& s = o.serve;
  c->add_option("--model", s.model_dir, "Model folder")->required();
  c->add_option("--model-name", s.model_name, "Model id clients send (default: folder name)");
  c->add_option("--listen", o.listen, "HOST:PORT (port 0: any free port)")->default_val(o.listen);
  auto* workers = c->add_option("--workers", o.workers,
                                "Serve sharded over K loopback worker processes")
                      ->check(CLI::Range(1, 64));
  c->add_option("--config", o.config_path, "Serve sharded over a running cluster (cluster config)")
      ->check(CLI::ExistingFile)
      ->excludes(workers);
  c->add_option("--draft-model", o.draft_model,
                "Requests with \"speculative\": true take proposals from this smaller model's greedy "
                "decode (a folder or .gguf with the same tokenizer) instead of prompt lookup");
  c->add_flag("--ship-logits", o.ship_logits, "Send every step's logits to the coordinator, which chooses the token (same digests)");
  c->add_option("--threads", s.threads, "Compute threads (including the scheduler)")->default_val(1);
  c->add_option("--isa", s.isa, "Kernels: scalar|avx2|avx512|neon|auto")->default_val("auto");
  c->add_option("--weight-cache", s.weight_cache,
                "Keep packed weights in this directory and read them back on later loads (verified "
                "against the checkpoint every time); with --workers K, every local worker's too");
  c->add_option("--max-sessions", s.scheduler.max_sessions, "Concurrent sessions before 429")
      ->default_val(s.scheduler.max_sessions);
  c->add_option("--kv-budget-mib", o.kv_budget_mib, "KV bytes reserved by sessions before 429")
      ->default_val(o.kv_budget_mib);
  c->add_option("--prefix-cache-mib", o.prefix_cache_mib, "Prefix cache budget (0 = off)")
      ->default_val(o.prefix_cache_mib);
  c->add_option("--max-positions", s.limits.max_positions,
                "Positions one request may reach (0: the model's max_position_embeddings; only "
                "lowers it)")
      ->default_val(s.limits.max_positions);
  c->add_option("--prefill-chunk", s.scheduler.prefill_chunk, "Prompt tokens prefilled per step")
      ->default_val(s.scheduler.prefill_chunk)->check(CLI::Range(1, 1 << 20));
  c->add_option("--max-body-bytes", s.http.max_body_bytes, "Larger request bodies get 413")
      ->default_val(s.http.max_body_bytes);
  c->add_option("--max-connections", s.http.max_connections, "Open connections before 429")
      ->default_val(s.http.max_connections);
  c->add_option("--max-connections-per-client", s.http.max_connections_per_client,
                "Open connections from one source address before 429")
      ->default_val(s.http.max_connections_per_client);
  c->add_option("--idle-timeout-ms", s.http.idle_timeout_ms,
                "Close a kept-alive connection with no request for this long")
      ->default_val(s.http.idle_timeout_ms);
  c->add_option("--header-timeout-ms", s.http.header_timeout_ms,
                "Close a connection whose request header takes longer")
      ->default_val(s.http.header_timeout_ms);
  c->add_option("--body-timeout-ms", s.http.body_timeout_ms,
                "Close a connection whose request body takes longer")
      ->default_val(s.http.body_timeout_ms);
  c->add_option("--write-timeout-ms", s.http.write_timeout_ms,
                "Close a connection that takes no response bytes (or event) for this long")
      ->default_val(s.http.write_timeout_ms);
  c->add_option("--shutdown-grace-ms", s.shutdown_grace_ms,
                "On SIGTERM, let in-flight requests finish this long, then cancel them")
      ->default_val(s.shutdown_grace_ms);
  return c;
}

int RunServeCommand(ServeCommandOptions& o) {
  Status st = ParseListen(o.listen, &o.serve.http);
  if (st.ok() && (o.kv_budget_mib <= 0 || o.prefix_cache_mib < 0)) {
    st = InvalidError("--kv-budget-mib must be > 0 and --prefix-cache-mib >= 0");
  }
  if (st.ok()) {
    o.serve.scheduler.kv_budget_bytes = static_cast<uint64_t>(o.kv_budget_mib * 1048576.0);
    o.serve.scheduler.prefix_budget_bytes = static_cast<uint64_t>(o.prefix_cache_mib * 1048576.0);
    st = Serve(o);
  }
  if (st.ok()) std::cout << "lockstep serve: stopped" << std::endl;
  return ExitStatus("serve", st);
}

}  // namespace lockstep::cli
