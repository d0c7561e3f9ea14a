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
  const TokenizerIdentity target = TokenizerIdentityOf(
      files, coordinator->model_config(), coordinator->seed().tokenizer_sha256);
  LOCKSTEP_ASSIGN_OR_RETURN(const std::unique_ptr<DraftModel> draft,
                            LoadDraftModel(o.run.draft_model, target, o.run.compute));
  SpeculativeStats stats;
  LOCKSTEP_ASSIGN_OR_RETURN(runtime::ClusterRun run,
                            runtime::RunOnCluster(*coordinator, req, o.run.window, 2, o.run.trace,
                                                  DecoderFor(o.run.speculative, &stats, draft.get())));
  RunReport report;
  report.result = run.result;
  report.request = req;
  report.site = runtime::RunSite{coordinator->seed(), coordinator->plan_text(),
                                 runtime::ReceiptWorkers(*coordinator)};
  report.generated_text = runtime::DecodeText(files, run.result.generated);
  report.notes = runtime::ClusterNotes(*coordinator, run);
  if (o.run.speculative) report.notes.push_back(SpeculativeNote(stats, draft.get()));
  report.speculative = SpeculativeSource(o.run.speculative, draft.get());
  report.timings = {{"decode_ms_per_token_sharded", run.decode_ms_per_token}};
  report.signer = signer ? &*signer : nullptr;
  if (o.shutdown_workers) coordinator->ShutdownWorkers("coordinator finished");
  return PrintReport(report, o.run.json, std::cout, o.run.receipt_path);
}

}  // namespace

CLI::App* AddCoordinatorCommand(CLI::App& app, CoordinatorCommandOptions& o) {
  CLI::App* cmd = app.add_subcommand("coordinator", "Decode on running workers (cluster config)");
  cmd->add_option("--config", o.config, "Cluster config JSON (see configs/)")->required();
  AddRequestOptions(cmd, o.run);
  cmd->add_flag("--shutdown-workers", o.shutdown_workers, "Ask the workers to exit afterwards");
  return cmd;
}

int RunCoordinatorCommand(const CoordinatorCommandOptions& o) {
  return ExitStatus("coordinator", RunCoordinator(o));
}

}  // namespace lockstep::cli
