#include "cli/run_command.h"

#include <charconv>
#include <iostream>

#include "base/limits.h"
#include "cli/report.h"
#include "cli/sharded_run.h"
#include "engine/local_backend.h"
#include "engine/model_loader.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/thread_pool.h"
#include "engine/tokenizer/tokenizer.h"

namespace lockstep::cli {

std::optional<std::string> DecodeText(const ModelFiles& files, const std::vector<uint32_t>& ids) {
  if (!files.has_tokenizer) return std::nullopt;
  auto tok = Tokenizer::FromFile(files.tokenizer_path);
  if (!tok.ok()) return std::nullopt;
  return tok->Decode(ids);
}

namespace {
// Kernel choice for the monolithic run (bits are the same for every one).
struct ComputeOptions {
  std::string isa = "auto";
  size_t threads = 1;
};
ComputeOptions compute_options;
}  // namespace

CLI::App* AddRunCommand(CLI::App& app, RunOptions& o) {
  CLI::App* run = app.add_subcommand("run", "Greedy decode with CIS-2 digests");
  run->add_option("--model", o.model_dir, "Model folder (config.json, model.safetensors, tokenizer.json)")
      ->required();
  auto* prompt = run->add_option("--prompt", o.prompt, "Prompt text (needs tokenizer.json)");
  auto* ids = run->add_option("--ids", o.ids, "Prompt token ids, comma separated");
  prompt->excludes(ids);
  run->add_option("--gen", o.gen, "Tokens to generate")->default_val(16);
  run->add_flag("--json", o.json, "Print one JSON object");
  run->add_option("--window", o.window, "Sliding window W for every layer (0 = none)");
  run->add_option("--evict", o.evictions, "FROM:COUNT@STEP: evict a span after step STEP's token");
  run->add_option("--manifest", o.manifest, "JSON file pinning the artifacts' sha256");
  run->add_option("--expect", o.expect, "Built-in pins to verify (smollm2-135m)");
  run->add_option("--workers", o.workers, "Shard over K local worker processes");
  run->add_option("--plan", o.plan, "Explicit layer ranges, e.g. 0:10,10:20,20:30");
  run->add_flag("--compare-monolithic", o.compare_monolithic,
                "Also run monolithically; fail unless every digest is equal");
  AddReceiptOptions(run, o);
  run->add_flag("--single-run", o.single_run,
                "Decode once: skip the §12.4 same-process double run (the default doubles the time)");
  run->add_option("--temperature", o.sampling.temperature,
                  "0 = greedy (default); > 0 samples as docs/sampling.md defines");
  run->add_option("--top-k", o.sampling.top_k, "Sample among the K likeliest (0 = all)");
  run->add_option("--top-p", o.sampling.top_p, "Sample within cumulative probability P");
  run->add_option("--seed", o.sampling.seed, "Sampling seed");
  run->add_option("--isa", compute_options.isa, "Kernels: scalar|avx2|avx512|neon|auto")
      ->default_val("auto");
  run->add_option("--threads", compute_options.threads, "Compute threads (including the caller)")
      ->default_val(1);
  return run;
}

void AddReceiptOptions(CLI::App* cmd, RunOptions& o) {
  cmd->add_option("--receipt", o.receipt_path, "Also write the run's receipt (JSON) to this file");
  cmd->add_option("--sign-key", o.sign_key, "Sign the receipt with this key file (lockstep keygen)");
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
                                   const std::string& tokenizer_path, bool has_tokenizer) {
  DecodeRequest req;
  req.gen = o.gen;
  req.max_positions = MaxPositions(Limits{}, max_position_embeddings);
  req.sampling = o.sampling;
  if (o.ids) {
    LOCKSTEP_ASSIGN_OR_RETURN(req.prompt, ParseIdList(*o.ids));
  } else if (o.prompt) {
    if (!has_tokenizer) return NotFoundError("--prompt needs a tokenizer.json in the model folder");
    LOCKSTEP_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromFile(tokenizer_path));
    req.prompt = tok.Encode(*o.prompt);
  } else {
    return InvalidError("give --prompt TEXT or --ids N,N,...");
  }
  for (const std::string& e : o.evictions) {
    LOCKSTEP_ASSIGN_OR_RETURN(EvictSpec spec, ParseEvictSpec(e));
    req.evictions.push_back(spec);
  }
  if (o.window && *o.window < 0) return InvalidError("--window must be >= 0");
  LOCKSTEP_RETURN_IF_ERROR(ValidateDecodeRequest(req));
  return req;
}

namespace {

Result<DecodeResult> DecodeOnce(const Stage& stage, const DecodeRequest& req,
                                std::optional<int> window, const WitnessSeed& seed) {
  LocalBackend backend(stage);
  if (window) LOCKSTEP_RETURN_IF_ERROR(backend.SetWindow(*window));
  return RunDecode(backend, req, seed);
}

// §12.4: the whole decode twice in one process; all three must agree.
Status CheckSameRun(const DecodeResult& a, const DecodeResult& b) {
  if (a.cis2_ref != b.cis2_ref || a.argmax_digest != b.argmax_digest ||
      a.generated != b.generated) {
    return InternalError("determinism check (§12.4) failed: two runs in one process differ");
  }
  return Status::Ok();
}

Status RunMonolithic(const RunOptions& o) {
  LOCKSTEP_ASSIGN_OR_RETURN(auto signer, LoadSignKey(o.sign_key));
  LOCKSTEP_ASSIGN_OR_RETURN(ModelPins pins, ResolvePins(o.manifest, o.expect));
  LOCKSTEP_ASSIGN_OR_RETURN(OpenModel model, OpenModelDir(o.model_dir, pins));
  LOCKSTEP_ASSIGN_OR_RETURN(DecodeRequest req,
                            BuildRequest(o, model.config.max_position_embeddings,
                                         model.files.tokenizer_path, model.files.has_tokenizer));
  const StageSpec all{0, model.config.num_layers, true, true};
  LOCKSTEP_ASSIGN_OR_RETURN(
      LoadedStage stage,
      LoadStage(model, all, lockstep::ComputeOptions{compute_options.isa, compute_options.threads}));
  const WitnessSeed seed = model.Seed();
  LOCKSTEP_ASSIGN_OR_RETURN(DecodeResult run1, DecodeOnce(*stage, req, o.window, seed));
  if (!o.single_run) {
    LOCKSTEP_ASSIGN_OR_RETURN(DecodeResult run2, DecodeOnce(*stage, req, o.window, seed));
    LOCKSTEP_RETURN_IF_ERROR(CheckSameRun(run1, run2));
  }
  RunReport report{run1, seed, DecodeText(model.files, run1.generated), "", {}};
  report.window = o.window;
  report.evictions = req.evictions;
  report.sampling = req.sampling;
  report.signer = signer ? &*signer : nullptr;
  return PrintReport(report, o.json, std::cout, o.receipt_path);
}

}  // namespace

int RunRunCommand(const RunOptions& o) {
  if (o.workers != 0 || !o.plan.empty()) return RunShardedCommand(o);
  Status st = RunMonolithic(o);
  if (!st.ok()) {
    std::cerr << "lockstep run: " << st.ToString() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace lockstep::cli
