// Test helpers for weight cache files (engine/weight_cache.h's format):
// whole files read and written, and a file's entries parsed here on their
// own (not by WeightCache::Open), so a test can damage one field of one
// entry and know which.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace lockstep::testing {

inline std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

inline void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// The one file in `dir` (a cache directory after one stage's load).
inline std::string OnlyFile(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().string());
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? "" : files[0];
}

inline uint64_t U64At(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  std::memcpy(&v, b.data() + at, 8);
  return v;
}

// One entry of a cache file's header, and where its fields are.
struct CacheEntry {
  std::string name;
  uint8_t type = 0;
  uint64_t rows = 0, cols = 0, offset = 0, bytes = 0;
  size_t type_at = 0;  // file offset of the type byte; rows, cols, offset, bytes follow as u64
};

// The entries of a well-formed cache file, in order.
inline std::vector<CacheEntry> CacheEntries(const std::vector<uint8_t>& file) {
  uint32_t count = 0;
  std::memcpy(&count, file.data() + 12, 4);
  std::vector<CacheEntry> out;
  size_t at = 24;
  for (uint32_t i = 0; i < count; ++i) {
    CacheEntry e;
    const size_t len = file[at] | file[at + 1] << 8;
    e.name.assign(reinterpret_cast<const char*>(file.data() + at + 2), len);
    e.type_at = at + 2 + len;
    e.type = file[e.type_at];
    e.rows = U64At(file, e.type_at + 1);
    e.cols = U64At(file, e.type_at + 9);
    e.offset = U64At(file, e.type_at + 17);
    e.bytes = U64At(file, e.type_at + 25);
    out.push_back(e);
    at = e.type_at + 33;
  }
  return out;
}

}  // namespace lockstep::testing
