#include "cli/coordinator_command.h"

#include <iostream>

#include <zmq.hpp>

#include "cli/exit_status.h"
#include "cli/report.h"
#include "cli/speculative_option.h"
#include "runtime/cluster_run.h"
#include "runtime/generated_text.h"

namespace lockstep::cli {
namespace {

Status RunCoordinator(const CoordinatorCommandOptions& o) {
  LOCKSTEP_ASSIGN_OR_RETURN(auto signer, LoadSignKey(o.run.sign_key));
  LOCKSTEP_ASSIGN_OR_RETURN(ClusterConfig cfg, LoadClusterConfig(o.config));
  cfg.ship_logits = cfg.ship_logits || o.run.ship_logits;
  zmq::context_t context(1);
  LOCKSTEP_ASSIGN_OR_RETURN(auto coordinator, Coordinator::Start(context, cfg));
  const ModelFiles& files = coordinator->model_files();
  LOCKSTEP_ASSIGN_OR_RETURN(DecodeRequest req,
                            BuildRequest(o.run, coordinator->model_config().max_position_embeddings,
                                         files));
  SpeculativeStats stats;
  LOCKSTEP_ASSIGN_OR_RETURN(runtime::ClusterRun run,
                            runtime::RunOnCluster(*coordinator, req, o.run.window, 2, o.run.trace,
                                                  DecoderFor(o.run.speculative, &stats)));
  RunReport report;
  report.result = run.result;
  report.request = req;
  report.site = runtime::RunSite{coordinator->seed(), coordinator->plan_text(),
                                 runtime::ReceiptWorkers(*coordinator)};
  report.generated_text = runtime::DecodeText(files, run.result.generated);
  report.notes = runtime::ClusterNotes(*coordinator, run);
  if (o.run.speculative) report.notes.push_back(SpeculativeNote(stats));
  report.speculative = o.run.speculative;
  report.timings = {{"decode_ms_per_token_sharded", run.decode_ms_per_token}};
  report.signer = signer ? &*signer : nullptr;
  if (o.shutdown_workers) coordinator->ShutdownWorkers("coordinator finished");
  return PrintReport(report, o.run.json, std::cout, o.run.receipt_path);
}

}  // namespace

CLI::App* AddCoordinatorCommand(CLI::App& app, CoordinatorCommandOptions& o) {
  CLI::App* cmd = app.add_subcommand("coordinator", "Decode on running workers (cluster config)");
  cmd->add_option("--config", o.config, "Cluster config JSON (see configs/)")->required();
  auto* prompt = cmd->add_option("--prompt", o.run.prompt, "Prompt text (needs tokenizer.json)");
  auto* ids = cmd->add_option("--ids", o.run.ids, "Prompt token ids, comma separated");
  prompt->excludes(ids);
  cmd->add_option("--gen", o.run.gen, "Tokens to generate")->default_val(16);
  cmd->add_flag("--json", o.run.json, "Print one JSON object");
  cmd->add_option("--window", o.run.window, "Sliding window W for every layer (0 = none)");
  cmd->add_option("--evict", o.run.evictions, "FROM:COUNT@STEP: evict a span after step STEP");
  AddReceiptOptions(cmd, o.run);
  AddSpeculativeFlag(cmd, &o.run.speculative);
  cmd->add_flag("--ship-logits", o.run.ship_logits, "Send every step's logits to the coordinator, which chooses the token (same digests)");
  cmd->add_flag("--shutdown-workers", o.shutdown_workers, "Ask the workers to exit afterwards");
  return cmd;
}

int RunCoordinatorCommand(const CoordinatorCommandOptions& o) {
  return ExitStatus("coordinator", RunCoordinator(o));
}

}  // namespace lockstep::cli
