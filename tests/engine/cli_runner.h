// Test helper: runs the built `lockstep` binary and captures its output.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
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

// The JSON object on the last non-empty line of a command's stdout.
nlohmann::json LastLineJson(const std::string& out);

// The JSON in file `path` (a receipt a command wrote); throws when it is not JSON.
nlohmann::json ReadJsonFile(const std::string& path);

// One case of ../shared/fixtures/conformance/vectors.json (or of
// extension-vectors.json's GGUF cases).
struct ConformanceCase {
  std::string name;
  std::vector<std::string> run_args;  // "run" "--model" DIR then the case's args
  nlohmann::json expect;              // key -> independently computed value
};
// Every case of vectors.json and the tiny-gguf-* cases of
// extension-vectors.json, or none when the shared fixtures are absent.
std::vector<ConformanceCase> LoadConformanceCases();
// Appends one vectors file case `c` (run --model MODEL ARGS...).
void AddConformanceCase(const nlohmann::json& c, std::vector<ConformanceCase>& cases);
// Checks a run's --json output against a case: every expected key present
// and equal. A case that expects nothing fails (it would assert nothing).
void ExpectConformanceCase(const ConformanceCase& c, const nlohmann::json& got);
// Runs every case with `extra_args` and --json, checks it (and `also`, if
// given, on its output); LOCKSTEP_FIXTURE_ABSENT when the fixtures are not
// there, a failure when they hold no case.
void ExpectConformanceVectors(const std::vector<std::string>& extra_args,
                              const std::function<void(const nlohmann::json&)>& also = {});

// A fresh empty directory under the test binary's temp area.
std::string MakeTempDir(const std::string& tag);

}  // namespace lockstep::testing
