#include "cli_runner.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tests/fixture_absent.h"

namespace lockstep::testing {
namespace {

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

CliOutput RunCli(const std::vector<std::string>& args) {
  const std::string dir = MakeTempDir("cli");
  std::string cmd = Quote(LOCKSTEP_CLI_PATH);
  for (const auto& a : args) cmd += " " + Quote(a);
  cmd += " >" + Quote(dir + "/out") + " 2>" + Quote(dir + "/err") + " </dev/null";
  const int rc = std::system(cmd.c_str());
  CliOutput o;
  o.exit_code = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  o.out = Slurp(dir + "/out");
  o.err = Slurp(dir + "/err");
  std::filesystem::remove_all(dir);
  return o;
}

std::string SharedPath(const std::string& rel) {
  const char* env = std::getenv("LOCKSTEP_SHARED_DIR");
  const std::string base = env ? env : LOCKSTEP_SHARED_DIR;
  const std::string p = base + "/" + rel;
  return std::filesystem::exists(p) ? p : "";
}

nlohmann::json LastLineJson(const std::string& out) {
  const size_t end = out.find_last_not_of('\n');
  const size_t start = out.rfind('\n', end);
  return nlohmann::json::parse(out.substr(start == std::string::npos ? 0 : start + 1));
}

nlohmann::json ReadJsonFile(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

std::vector<ConformanceCase> LoadConformanceCases() {
  const std::string vectors = SharedPath("fixtures/conformance/vectors.json");
  if (vectors.empty()) return {};
  std::vector<ConformanceCase> cases;
  // vectors.json, and extension-vectors.json's GGUF cases (E2).
  for (const char* file : {"vectors.json", "extension-vectors.json"}) {
    const std::string path = SharedPath(std::string("fixtures/conformance/") + file);
    if (path.empty()) continue;
    const nlohmann::json doc = ReadJsonFile(path);
    for (const auto& c : doc["cases"]) {
      const std::string name = c["name"].get<std::string>();
      if (std::string(file) != "vectors.json" && name.rfind("tiny-gguf-", 0) != 0) continue;
      AddConformanceCase(c, cases);
    }
  }
  return cases;
}

void AddConformanceCase(const nlohmann::json& c, std::vector<ConformanceCase>& cases) {
  ConformanceCase cc{c["name"].get<std::string>(),
                     {"run", "--model",
                      SharedPath("fixtures/conformance/" + c["model"].get<std::string>())},
                     c["expect"]};
  for (const auto& a : c["args"]) cc.run_args.push_back(a.get<std::string>());
  cases.push_back(std::move(cc));
}

void ExpectConformanceCase(const ConformanceCase& c, const nlohmann::json& got) {
  ASSERT_TRUE(c.expect.is_object() && !c.expect.empty())
      << "conformance case '" << c.name << "' expects nothing: it would assert nothing";
  for (const auto& [key, want] : c.expect.items()) {
    ASSERT_TRUE(got.contains(key)) << "case '" << c.name << "': the output has no " << key;
    EXPECT_EQ(got[key], want) << "case '" << c.name << "': key " << key;
  }
}

void ExpectConformanceVectors(const std::vector<std::string>& extra_args,
                              const std::function<void(const nlohmann::json&)>& also) {
  if (SharedPath("fixtures/conformance/vectors.json").empty()) {
    LOCKSTEP_FIXTURE_ABSENT() << "shared conformance fixtures are absent";
  }
  const std::vector<ConformanceCase> cases = LoadConformanceCases();
  ASSERT_FALSE(cases.empty()) << "vectors.json holds no case";
  for (const ConformanceCase& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<std::string> args = c.run_args;
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    args.push_back("--json");
    const CliOutput o = RunCli(args);
    ASSERT_EQ(o.exit_code, 0) << o.err;
    const nlohmann::json got = LastLineJson(o.out);
    ExpectConformanceCase(c, got);
    if (also) also(got);
  }
}

std::string MakeTempDir(const std::string& tag) {
  static std::mt19937_64 rng(std::random_device{}());
  const auto base = std::filesystem::temp_directory_path() / "lockstep-tests";
  std::filesystem::create_directories(base);
  const auto dir = base / (tag + "-" + std::to_string(getpid()) + "-" + std::to_string(rng()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace lockstep::testing
