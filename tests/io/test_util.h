// Helpers shared by the io tests: a per-test scratch directory and file
// reading. Test-only code; not thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace lockstep::testing {

// A fresh empty directory under the build tree, named after the running test.
inline std::string ScratchDir() {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::filesystem::path dir = std::filesystem::path(LOCKSTEP_BINARY_DIR) /
                              "io_test_scratch" /
                              (std::string(info->test_suite_name()) + "." + info->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

inline std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::string SharedPath(const std::string& rel) {
  return std::string(LOCKSTEP_SHARED_DIR) + "/" + rel;
}

inline bool Exists(const std::string& path) {
  return std::filesystem::exists(path);
}

}  // namespace lockstep::testing
