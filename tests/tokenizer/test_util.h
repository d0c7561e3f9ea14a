// Helpers for tokenizer tests: fixture paths under LOCKSTEP_SHARED_DIR and a
// once-per-process load of the SmolLM2 tokenizer.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/tokenizer/tokenizer.h"
#include "tests/fixture_absent.h"

namespace lockstep::testing {

inline std::string SharedPath(const std::string& rel) {
  return std::string(LOCKSTEP_SHARED_DIR) + "/" + rel;
}

inline bool SharedExists(const std::string& rel) {
  return std::filesystem::exists(SharedPath(rel));
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline constexpr char kSmolPath[] = "fixtures/smollm2-135m/tokenizer.json";

// Loaded once; nullptr if the fixture is absent or fails to load.
inline const Tokenizer* Smol() {
  static const Tokenizer* tok = []() -> const Tokenizer* {
    if (!SharedExists(kSmolPath)) return nullptr;
    auto r = Tokenizer::FromFile(SharedPath(kSmolPath));
    if (!r.ok()) {
      ADD_FAILURE() << r.status().ToString();
      return nullptr;
    }
    return new Tokenizer(std::move(r).value());
  }();
  return tok;
}

#define LOCKSTEP_REQUIRE_SMOL()                                                \
  const ::lockstep::Tokenizer* smol = ::lockstep::testing::Smol();            \
  if (smol == nullptr) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << ::lockstep::testing::SharedPath( \
                           ::lockstep::testing::kSmolPath)

inline std::vector<uint32_t> Concat(std::initializer_list<std::vector<uint32_t>> parts) {
  std::vector<uint32_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace lockstep::testing
