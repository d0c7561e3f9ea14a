// `lockstep bench`: the figures of runtime::RunBench (runtime/bench.h) as
// "key: value" lines or one JSON object. Exit 1 when a batched session's
// digest differs from its solo run.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "runtime/bench.h"

namespace lockstep::cli {

struct BenchOptions {
  runtime::BenchOptions bench;
  std::string weights = "bf16";  // bf16 (resident) | f32 (widened at load)
  bool json = false;
};

CLI::App* AddBenchCommand(CLI::App& app, BenchOptions& opts);
int RunBenchCommand(BenchOptions& opts);

}  // namespace lockstep::cli
