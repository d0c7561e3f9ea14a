// Test helper: runs the built `lockstep` binary and captures its output.
#pragma once

#include <string>
#include <vector>

namespace lockstep::testing {

struct CliOutput {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs `lockstep args...` (arguments are shell-quoted).
CliOutput RunCli(const std::vector<std::string>& args);

// LOCKSTEP_SHARED_DIR + "/" + rel, or "" when that path does not exist.
std::string SharedPath(const std::string& rel);

// A fresh empty directory under the test binary's temp area.
std::string MakeTempDir(const std::string& tag);

}  // namespace lockstep::testing
