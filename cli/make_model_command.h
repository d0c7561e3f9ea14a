// `lockstep make-model OUT_DIR --seed S ...`: writes a deterministic
// synthetic checkpoint (config.json, bf16 model.safetensors, tokenizer.json).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "engine/io/synthetic_model.h"

namespace lockstep::cli {

struct MakeModelOptions {
  std::string out_dir;
  uint64_t seed = 0;
  std::string shape;          // "smollm2-135m" or empty
  SyntheticShape dims;
  std::string tokenizer_path;  // copy instead of generating
  std::string config_path;     // copy instead of generating
  int shards = 1;              // > 1: a sharded checkpoint in that many files
};

CLI::App* AddMakeModelCommand(CLI::App& app, MakeModelOptions& opts);
int RunMakeModelCommand(const MakeModelOptions& opts);

}  // namespace lockstep::cli
