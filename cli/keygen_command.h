// `lockstep keygen OUT [--force]`: writes a new node identity, OUT (secret,
// mode 0600) and OUT.pub (public), in the keys/identity.h format, and
// prints the public keys only.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace lockstep::cli {

struct KeygenOptions {
  std::string out_path;
  bool force = false;
};

CLI::App* AddKeygenCommand(CLI::App& app, KeygenOptions& opts);
int RunKeygenCommand(const KeygenOptions& opts);

}  // namespace lockstep::cli
