#include "cli/run_command.h"

#include <charconv>
#include <cstdio>
#include <iostream>

#include "base/limits.h"
#include "cli/exit_status.h"
#include "cli/report.h"
#include "cli/speculative_option.h"
#include "engine/speculative.h"
#include "engine/tokenizer/tokenizer.h"
#include "runtime/cluster_run.h"
#include "runtime/compare.h"
#include "runtime/generated_text.h"
#include "runtime/local_run.h"
#include "runtime/model_tokenizer.h"

namespace lockstep::cli {

CLI::App* AddRunCommand(CLI::App& app, RunOptions& o) {
  CLI::App* run = app.add_subcommand("run", "Greedy decode with CIS-2 digests");
  run->add_option("--model", o.model_dir, "Model folder (config.json, model.safetensors, tokenizer.json)")
      ->required();
  AddRequestOptions(run, o);
  run->add_option("--manifest", o.manifest, "JSON file pinning the artifacts' sha256");
  run->add_option("--expect", o.expect, "Built-in pins to verify (smollm2-135m)");
  run->add_option("--workers", o.workers, "Shard over K local worker processes");
  run->add_option("--plan", o.plan, "Explicit layer ranges, e.g. 0:10,10:20,20:30");
  run->add_option("--plan-balance", o.plan_balance,
                  "What the automatic plan balances: memory (each stage's weight bytes) or "
                  "memory+work (plus the bytes a token reads of them)");
  run->add_flag("--compare-monolithic", o.compare_monolithic,
                "Also run monolithically; fail unless every digest is equal");
  run->add_flag("--single-run", o.single_run,
                "Decode once: skip the §12.4 same-process double run (the default doubles the time)");
  run->add_option("--isa", o.compute.isa, "Kernels: scalar|avx2|avx512|neon|auto (every worker's too)")
      ->default_val("auto");
  run->add_option("--threads", o.compute.threads,
                  "Compute threads, including the caller (every worker's too)")
      ->default_val(1)
      ->check(CLI::Range(1, 256));
  run->add_option("--weight-cache", o.compute.weight_cache,
                  "Keep packed weights in this directory and read them back on later loads (verified "
                  "against the checkpoint every time; every local worker's too)");
  return run;
}

void AddRequestOptions(CLI::App* cmd, RunOptions& o) {
  auto* prompt = cmd->add_option("--prompt", o.prompt, "Prompt text (needs tokenizer.json)");
  auto* ids = cmd->add_option("--ids", o.ids, "Prompt token ids, comma separated");
  prompt->excludes(ids);
  cmd->add_option("--gen", o.gen, "Tokens to generate")->default_val(16);
  cmd->add_flag("--json", o.json, "Print one JSON object");
  cmd->add_option("--window", o.window, "Sliding window W for every layer (0 = none)");
  cmd->add_option("--evict", o.evictions, "FROM:COUNT@STEP: evict a span after step STEP's token");
  cmd->add_option("--temperature", o.sampling.temperature,
                  "0 = greedy (default); > 0 samples as docs/sampling.md defines");
  cmd->add_option("--top-k", o.sampling.top_k, "Sample among the K likeliest (0 = all)");
  cmd->add_option("--top-p", o.sampling.top_p, "Sample within cumulative probability P");
  cmd->add_option("--seed", o.sampling.seed, "Sampling seed");
  cmd->add_option("--receipt", o.receipt_path, "Also write the run's receipt (JSON) to this file");
  cmd->add_option("--sign-key", o.sign_key, "Sign the receipt with this key file (lockstep keygen)");
  cmd->add_flag("--trace", o.trace,
                "Record every step's per-layer hidden-state sha256 in the receipt (docs/receipts.md)");
  AddSpeculativeFlags(cmd, &o.speculative, &o.draft_model);
  cmd->add_flag("--ship-logits", o.ship_logits,
                "Send every step's logits to the coordinator, which chooses the token (same digests)");
}

Result<std::vector<uint32_t>> ParseIdList(const std::string& text) {
  std::vector<uint32_t> ids;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view part = std::string_view(text).substr(start, end - start);
    uint32_t v = 0;
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
    if (part.empty() || ec != std::errc() || p != part.data() + part.size()) {
      return InvalidError("--ids: '" + std::string(part) + "' is not a token id");
    }
    ids.push_back(v);
    start = end + 1;
  }
  return ids;
}

Result<ModelPins> ResolvePins(const std::string& manifest, const std::string& expect) {
  ModelPins pins;
  if (!expect.empty()) {
    auto builtin = BuiltinPins(expect);
    if (!builtin) return InvalidError("--expect: no built-in pins named '" + expect + "'");
    pins = *builtin;
  }
  if (!manifest.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(ModelPins m, LoadManifest(manifest));
    if (m.weights) pins.weights = m.weights;
    if (m.tokenizer) pins.tokenizer = m.tokenizer;
    if (m.config) pins.config = m.config;
    pins.files.insert(m.files.begin(), m.files.end());
  }
  return pins;
}

Result<DecodeRequest> BuildRequest(const RunOptions& o, int max_position_embeddings,
                                   const ModelFiles& files) {
  DecodeRequest req;
  req.gen = o.gen;
  req.max_positions = MaxPositions(Limits{}, max_position_embeddings);
  req.sampling = o.sampling;
  req.window = o.window;
  if (o.ids) {
    LOCKSTEP_ASSIGN_OR_RETURN(req.prompt, ParseIdList(*o.ids));
  } else if (o.prompt) {
    Result<Tokenizer> tok = runtime::LoadModelTokenizer(files);
    if (!tok.ok()) return tok.status().WithContext("--prompt needs the model's tokenizer");
    req.prompt = tok->Encode(*o.prompt);
  } else {
    return InvalidError("give --prompt TEXT or --ids N,N,...");
  }
  for (const std::string& e : o.evictions) {
    LOCKSTEP_ASSIGN_OR_RETURN(EvictSpec spec, ParseEvictSpec(e));
    req.evictions.push_back(spec);
  }
  LOCKSTEP_RETURN_IF_ERROR(ValidateDecodeRequest(req));
  return req;
}

namespace {

// The report's fields every run shares; speculative: options.speculative.
RunReport NewReport(std::string speculative, const DecodeRequest& req, DecodeResult result,
                    const WitnessSeed& seed, const ModelFiles& files,
                    const std::optional<keys::Identity>& signer) {
  RunReport report;
  report.generated_text = runtime::DecodeText(files, result.generated);
  report.result = std::move(result);
  report.request = req;
  report.site.seed = seed;
  report.signer = signer ? &*signer : nullptr;
  report.speculative = std::move(speculative);
  return report;
}

std::string MsNote(double ms, const char* what) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "decode_ms_per_token   = %.3f (%s)", ms, what);
  return buf;
}

// What every run starts from: the signing key and the pins, before any
// file of the model is read.
struct Prepared {
  std::optional<keys::Identity> signer;
  ModelPins pins;
};

Result<Prepared> Prepare(const RunOptions& o) {
  Prepared p;
  LOCKSTEP_ASSIGN_OR_RETURN(p.signer, LoadSignKey(o.sign_key));
  LOCKSTEP_ASSIGN_OR_RETURN(p.pins, ResolvePins(o.manifest, o.expect));
  return p;
}

Result<DecodeRequest> RequestFor(const RunOptions& o, const ModelInfo& model) {
  return BuildRequest(o, model.config.max_position_embeddings, model.files);
}

// The weights are hashed while they load (LoadStage verifies the pins
// before the first token).
Status RunMonolithic(const RunOptions& o) {
  LOCKSTEP_ASSIGN_OR_RETURN(Prepared p, Prepare(o));
  LOCKSTEP_ASSIGN_OR_RETURN(OpenModel model, OpenModelDir(o.model_dir, p.pins));
  LOCKSTEP_ASSIGN_OR_RETURN(DecodeRequest req, RequestFor(o, model));
  LOCKSTEP_ASSIGN_OR_RETURN(const std::unique_ptr<DraftModel> draft,
                            LoadDraftModel(o.draft_model, TargetTokenizer(model), o.compute));
  SpeculativeStats stats;
  const runtime::LocalRunOptions local{o.window, o.compute, o.single_run ? 1 : 2, o.trace,
                                       DecoderFor(o.speculative, &stats, draft.get())};
  LOCKSTEP_ASSIGN_OR_RETURN(runtime::TimedResult run, runtime::RunMonolithic(model, req, local));
  RunReport report = NewReport(SpeculativeSource(o.speculative, draft.get()), req,
                               std::move(run.result), model.Seed(), model.files, p.signer);
  report.notes = {MsNote(run.decode_ms_per_token, "monolithic")};  // human only: --json stays reproducible
  if (o.speculative) report.notes.push_back(SpeculativeNote(stats, draft.get()));
  return PrintReport(report, o.json, std::cout, o.receipt_path);
}

// The coordinator's side hashes every artifact file before assigning.
Status RunSharded(const RunOptions& o) {
  LOCKSTEP_ASSIGN_OR_RETURN(Prepared p, Prepare(o));
  LOCKSTEP_ASSIGN_OR_RETURN(ModelInfo model, InspectModelDir(o.model_dir, p.pins));
  LOCKSTEP_ASSIGN_OR_RETURN(DecodeRequest req, RequestFor(o, model));
  LOCKSTEP_ASSIGN_OR_RETURN(const std::unique_ptr<DraftModel> draft,
                            LoadDraftModel(o.draft_model, TargetTokenizer(model), o.compute));
  SpeculativeStats stats;
  runtime::LoopbackOptions loopback{o.model_dir, o.workers, o.plan, o.window, o.compute,
                                    o.single_run ? 1 : 2, o.ship_logits, o.trace};
  loopback.decode = DecoderFor(o.speculative, &stats, draft.get());
  LOCKSTEP_ASSIGN_OR_RETURN(loopback.plan_balance, ParsePlanBalance(o.plan_balance));
  LOCKSTEP_ASSIGN_OR_RETURN(runtime::LoopbackRun lr,
                            runtime::RunOnLoopback(loopback, model, p.pins, req));
  RunReport report = NewReport(SpeculativeSource(o.speculative, draft.get()), req,
                               std::move(lr.run.result), model.Seed(), model.files, p.signer);
  report.site.plan = lr.plan;
  report.notes = std::move(lr.notes);
  report.site.workers = std::move(lr.stages);
  report.timings = {{"decode_ms_per_token_sharded", lr.run.decode_ms_per_token}};
  if (o.speculative) report.notes.push_back(SpeculativeNote(stats, draft.get()));
  if (o.compare_monolithic) {
    LOCKSTEP_ASSIGN_OR_RETURN(OpenModel mapped, MapWeights(model));
    const runtime::LocalRunOptions local{o.window, o.compute, 1, o.trace};
    LOCKSTEP_ASSIGN_OR_RETURN(runtime::TimedResult mono, runtime::RunMonolithic(mapped, req, local));
    LOCKSTEP_RETURN_IF_ERROR(
        runtime::CompareResults(report.result, mono.result, "sharded", "monolithic"));
    report.notes.push_back(MsNote(mono.decode_ms_per_token, "monolithic"));
    report.compared_with_monolithic = true;
  }
  return PrintReport(report, o.json, std::cout, o.receipt_path);
}

}  // namespace

int RunRunCommand(const RunOptions& o) {
  const bool sharded = o.workers != 0 || !o.plan.empty();
  return ExitStatus("run", sharded ? RunSharded(o) : RunMonolithic(o));
}

}  // namespace lockstep::cli
