#include "cli/bench_command.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "base/sha256.h"
#include "cli/exit_status.h"

namespace lockstep::cli {
namespace {

nlohmann::json ToJson(const BenchOptions& options, const runtime::BenchFigures& f) {
  const runtime::BenchOptions& o = options.bench;
  const double achieved = f.weight_bytes * f.decode_tok_s / 1e9;
  nlohmann::json j = {{"isa", f.isa}, {"threads", o.compute.threads},
                      {"sessions", o.sessions}, {"weights", f.weights},
                      {"decode_prompt_len", o.decode_prompt_len}, {"gen", o.gen},
                      {"prompt_len", o.prompt_len}, {"decode_tok_s", f.decode_tok_s},
                      {"prefill_tok_s", f.prefill_tok_s}, {"prefill_median_tok_s", f.prefill_median_tok_s},
                      {"ttft_s", f.ttft_s}, {"open_s", f.open_s}, {"load_s", f.load_s},
                      {"weight_bytes_per_token", f.weight_bytes}, {"achieved_gb_s", achieved},
                      {"stream_gb_s", f.stream_read_gb_s}, {"stream_read_gb_s", f.stream_read_gb_s},
                      {"stream_triad_gb_s", f.stream_triad_gb_s},
                      {"bandwidth_fraction", f.stream_read_gb_s > 0 ? achieved / f.stream_read_gb_s : 0.0},
                      {"peak_rss_bytes", f.peak_rss}, {"decode_cpu_share", f.decode_cpu_share},
                      {"ttft_cpu_s", f.ttft_cpu_s}};
  if (!o.compute.weight_cache.empty()) j["weight_cache"] = f.weight_cache_note;
  j["decode"] = {{"prompt_token_ids", f.decode.prompt},
                 {"generated_token_ids", f.decode.generated},
                 {"cis2_ref", ToHex(f.decode.cis2_ref)},
                 {"argmax_digest", ToHex(f.decode.argmax_digest)}};
  if (o.sessions > 1) {
    j["batched_tok_s"] = f.batched_tok_s;
    j["solo_tok_s"] = f.solo_tok_s;
    j["batched_speedup"] = f.solo_tok_s > 0 ? f.batched_tok_s / f.solo_tok_s : 0.0;
    j["batched_equals_solo"] = f.batched_equals_solo;
  }
  return j;
}

void PrintHuman(const nlohmann::json& j) {
  for (const auto& [key, value] : j.items()) std::cout << key << ": " << value << "\n";
}

}  // namespace

CLI::App* AddBenchCommand(CLI::App& app, BenchOptions& options) {
  runtime::BenchOptions& o = options.bench;
  CLI::App* b = app.add_subcommand("bench", "Throughput, latency and bandwidth on a model folder");
  b->add_option("--model", o.model_dir, "Model folder")->required();
  b->add_option("--threads", o.compute.threads, "Threads (including the caller)")->default_val(2);
  b->add_option("--sessions", o.sessions, "Concurrent sessions decoded as one batch")->default_val(1);
  b->add_option("--isa", o.compute.isa, "scalar|avx2|avx512|neon|auto")->default_val("auto");
  b->add_option("--weight-cache", o.compute.weight_cache,
                "Keep packed weights in this directory and read them back on later loads (verified "
                "against the checkpoint every time)");
  b->add_option("--weights", options.weights,
                "bf16: each weight resident at its checkpoint's type (BF16, F16, GGUF blocks) | "
                "f32: widened at load (the JSON's \"weights\" names the types held)")
      ->default_val("bf16")
      ->check(CLI::IsMember({"bf16", "f32"}));
  b->add_option("--prompt-len", o.prompt_len, "Prefill length measured")->default_val(128);
  b->add_option("--decode-prompt-len", o.decode_prompt_len, "Prompt before the decode run")->default_val(4);
  b->add_option("--gen", o.gen, "Tokens generated per session")->default_val(128);
  b->add_option("--repeats", o.repeats, "Prefill/stream repetitions (best reported)")->default_val(3);
  b->add_flag("--json", options.json, "Print one JSON object");
  return b;
}

int RunBenchCommand(BenchOptions& o) {
  o.bench.compute.weights = o.weights == "f32" ? WeightFormat::kPackedF32 : WeightFormat::kPackedBf16;
  Result<runtime::BenchFigures> figures = runtime::RunBench(o.bench);
  if (!figures.ok()) return ExitStatus("bench", figures.status());
  const runtime::BenchFigures& f = *figures;
  const nlohmann::json j = ToJson(o, f);
  if (o.json) {
    std::cout << j.dump() << "\n";
  } else {
    PrintHuman(j);
  }
  if (o.bench.sessions > 1 && !f.batched_equals_solo) {
    return ExitStatus("bench", MismatchError("a batched session's digest differs from its solo run"));
  }
  return 0;
}

}  // namespace lockstep::cli
