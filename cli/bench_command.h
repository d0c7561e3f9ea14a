// `lockstep bench`: decode/prefill throughput, time to first token, weight
// bytes per token and the bandwidth they imply, beside a STREAM-style
// bandwidth measured in the same run; with --sessions S > 1, S sessions
// decode as one batch and each is checked bit-equal to its solo run.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lockstep::cli {

struct BenchOptions {
  std::string model_dir;
  size_t threads = 2;
  size_t sessions = 1;
  std::string isa = "auto";
  std::string weights = "bf16";  // bf16 (resident) | f32 (widened at load)
  size_t prompt_len = 128;       // prefill measurement
  size_t decode_prompt_len = 4;  // decode measurement's prompt
  size_t gen = 128;
  size_t repeats = 3;            // prefill and stream: best of N
  bool json = false;
};

CLI::App* AddBenchCommand(CLI::App& app, BenchOptions& opts);
int RunBenchCommand(const BenchOptions& opts);

}  // namespace lockstep::cli
