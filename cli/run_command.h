// `lockstep run`: a decode of a model folder with every CIS-2 digest, in
// this process or sharded over loopback worker processes (runtime/).
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/decode.h"
#include "engine/io/model_files.h"
#include "engine/model_loader.h"

namespace lockstep::cli {

struct RunOptions {
  std::string model_dir;
  std::optional<std::string> prompt;
  std::optional<std::string> ids;
  uint32_t gen = 16;
  bool json = false;
  std::optional<int> window;
  std::vector<std::string> evictions;
  std::string manifest;      // optional pins file
  std::string expect;        // built-in pins name, e.g. smollm2-135m
  int workers = 0;           // > 0: sharded over local worker processes
  std::string plan;          // explicit cut points, e.g. 0:10,10:20,20:30
  std::string plan_balance = "memory";  // what the automatic plan balances
  bool compare_monolithic = false;
  bool single_run = false;   // skip the §12.4 second decode
  ComputeOptions compute;    // --isa/--threads: this process's and every worker's
  std::string receipt_path;  // --receipt FILE: also write the receipt there
  std::string sign_key;      // --sign-key KEY: sign the receipt with this identity
  SamplingParams sampling;   // --temperature/--top-k/--top-p/--seed; default greedy
  bool ship_logits = false;  // --ship-logits: logits to the coordinator (sharded runs)
  bool trace = false;        // --trace: per-layer hidden-state digests in the receipt
  bool speculative = false;  // --speculative: exact speculative decoding (same bits)
  std::string draft_model;   // --draft-model PATH: its proposals (implies speculative)
};

// Registers what a decoding subcommand (run, coordinator) asks for, the
// same way on each: the prompt (--prompt | --ids), --gen, --json, --window,
// --evict, sampling (--temperature, --top-k, --top-p, --seed), the receipt
// (--receipt, --sign-key, --trace), --speculative, --draft-model and
// --ship-logits.
void AddRequestOptions(CLI::App* cmd, RunOptions& o);

// Registers the subcommand; the caller runs RunRunCommand when it parsed.
CLI::App* AddRunCommand(CLI::App& app, RunOptions& opts);
int RunRunCommand(const RunOptions& opts);

// Shared by the decoding subcommands (run, coordinator).
Result<std::vector<uint32_t>> ParseIdList(const std::string& text);
Result<ModelPins> ResolvePins(const std::string& manifest, const std::string& expect);
Result<DecodeRequest> BuildRequest(const RunOptions& opts, int max_position_embeddings,
                                   const ModelFiles& files);

}  // namespace lockstep::cli
