// `lockstep verify RECEIPT --model DIR [--workers K | --config C.json]
// [--trust PUB]`: checks a receipt (docs/receipts.md) on this machine. In
// order: the signature (against --trust when given), the artifacts' sha256
// (a wrong file is named), the table digests, then a recomputation of the
// decode (monolithic, on K loopback workers, or on a cluster) compared step
// by step. Prints VERIFIED (exit 0) or the first difference with both values
// (exit 1).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "engine/model_loader.h"

namespace lockstep::cli {

struct VerifyOptions {
  std::string receipt_path;
  std::string model_dir;
  int workers = 0;
  std::string config;
  std::string trust;  // a key file (.pub or secret) or 64 hex characters
  bool ship_logits = false;  // recompute with logits sent to the coordinator
  ComputeOptions compute;    // --isa/--threads: here and on every loopback worker
};

CLI::App* AddVerifyCommand(CLI::App& app, VerifyOptions& opts);
int RunVerifyCommand(const VerifyOptions& opts);

}  // namespace lockstep::cli
