// §1.4: the built binaries contain no fused multiply-add instruction.
// Disassembles `lockstep` and every static library of the build with
// objdump and scans for x86 vfmadd/vfmsub/vfnmadd/vfnmsub and aarch64
// fmadd/fmsub/fnmadd/fnmsub/fmla/fmls.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

namespace {

const std::regex& FmaPattern() {
  static const std::regex re(
      R"(\s(vfn?m(add|sub)[0-9a-z]*|fn?m(add|sub)|fml[as])\s)");
  return re;
}

// Returns the first offending disassembly line, or "".
std::string FirstFmaLine(const std::string& path, bool* ran) {
  const std::string cmd = "objdump -d --no-show-raw-insn '" + path + "' 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  *ran = p != nullptr;
  if (p == nullptr) return "";
  char buf[4096];
  std::string hit;
  bool recognised = false;  // objdump printed "file format ..." for the input
  while (fgets(buf, sizeof buf, p) != nullptr) {
    const std::string line(buf);
    if (line.find("file format") != std::string::npos) recognised = true;
    // The substring test skips the regex on almost every line (a large
    // binary's disassembly is millions of lines); every pattern match
    // contains "fm" or "fnm".
    const bool candidate = line.find("fm") != std::string::npos ||
                           line.find("fnm") != std::string::npos;
    if (hit.empty() && candidate && std::regex_search(line, FmaPattern())) hit = line;
  }
  *ran = pclose(p) == 0 && recognised;
  return hit;
}

TEST(NoFma, PatternRecognisesFusedInstructions) {
  EXPECT_TRUE(std::regex_search("  4011a0:\tvfmadd231ss %xmm2,%xmm1,%xmm0\n", FmaPattern()));
  EXPECT_TRUE(std::regex_search("  10:\tfmla\tv0.4s, v1.4s, v2.4s\n", FmaPattern()));
  EXPECT_TRUE(std::regex_search("  10:\tfmadd\ts0, s1, s2, s3\n", FmaPattern()));
  EXPECT_FALSE(std::regex_search("  4011a0:\tvmulss %xmm2,%xmm1,%xmm0\n", FmaPattern()));
  EXPECT_FALSE(std::regex_search("  4011a0:\tvaddps %ymm2,%ymm1,%ymm0\n", FmaPattern()));
}

TEST(NoFma, BuiltBinariesAndLibrariesHaveNone) {
  std::vector<std::string> targets = {LOCKSTEP_CLI_PATH};
  namespace fs = std::filesystem;
  for (auto it = fs::recursive_directory_iterator(LOCKSTEP_BINARY_DIR);
       it != fs::recursive_directory_iterator(); ++it) {
    const auto& e = *it;
    // Other build trees nested here (the clang and aarch64 checks) are
    // checked by their own tests; this one covers this build's libraries.
    if (e.is_directory() && fs::exists(e.path() / "CMakeCache.txt")) {
      it.disable_recursion_pending();
      continue;
    }
    const std::string p = e.path().string();
    if (e.is_regular_file() && p.ends_with(".a") && p.find("liblockstep") != std::string::npos) {
      targets.push_back(p);
    }
  }
  ASSERT_GE(targets.size(), 2u) << "no libraries found under " << LOCKSTEP_BINARY_DIR;
  for (const auto& t : targets) {
    bool ran = false;
    const std::string hit = FirstFmaLine(t, &ran);
    ASSERT_TRUE(ran) << "objdump produced no disassembly for " << t;
    EXPECT_EQ(hit, "") << "FMA instruction in " << t << ": " << hit;
  }
}

}  // namespace
