// `lockstep make-model OUT_DIR --seed S ...`: writes a deterministic
// synthetic checkpoint (config.json, bf16 model.safetensors, tokenizer.json);
// with --gguf, OUT.gguf: one GGUF file of --quant TYPE (synthetic_gguf.h),
// or, with --from DIR, that folder converted (runtime/gguf_convert.h).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>

#include "engine/io/synthetic_model.h"

namespace lockstep::cli {

struct MakeModelOptions {
  std::string out_dir;
  std::optional<uint64_t> seed;  // required unless converting (--from)
  std::string shape;          // "smollm2-135m" or empty
  SyntheticShape dims;
  std::string tokenizer_path;  // copy instead of generating
  std::string config_path;     // copy instead of generating
  int shards = 1;              // > 1: a sharded checkpoint in that many files
  bool gguf = false;           // out_dir is a .gguf file to write
  std::string quant = "bf16";  // its weight type (GgufQuantMixByName)
  std::string from_dir;        // convert this folder instead of generating
};

CLI::App* AddMakeModelCommand(CLI::App& app, MakeModelOptions& opts);
int RunMakeModelCommand(const MakeModelOptions& opts);

}  // namespace lockstep::cli
