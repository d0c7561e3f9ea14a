// Test helpers for the weight cache (engine/weight_cache.h): a load with a
// cache directory and its decode; whole files read and written, and a cache
// file's entries parsed here on their own (not by WeightCache::Open), so a
// test can damage one field of one entry and know which.
#pragma once

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/model_loader.h"
#include "tests/ops/model_fixture.h"

namespace lockstep::testing {

// What a load with a weight cache gave.
struct CacheLoad {
  std::vector<float> logits;        // 6 greedy steps (a whole-model load only)
  std::vector<FileDigest> digests;  // of the files (or GGUF parts) read
  Digest weights{};                 // weights_sha256 (all zero for a stage read by parts)
  std::string note;                 // what the load did with the cache
};

// One load of `model` on two threads (every layer, or `stage` opened by
// its parts with `pins`) with `cache_dir` (empty: none) on `isa`, then a
// greedy decode of `prompt` when it holds every layer.
inline CacheLoad LoadWithCache(const std::string& model, const std::string& cache_dir,
                               const std::vector<uint32_t>& prompt, const std::string& isa = "auto",
                               const StageSpec* stage = nullptr, const ModelPins& pins = {}) {
  auto m = OpenModelDir(model, pins, stage);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  const StageSpec all{0, m->config.num_layers, true, true};
  auto s = LoadStage(*m, stage != nullptr ? *stage : all,
                     ComputeOptions{isa, 2, WeightFormat::kPackedBf16, cache_dir});
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  CacheLoad out;
  if (stage == nullptr) out.logits = DecodeLogits(**s, prompt, 6);
  out.digests = m->hashes.weight_files;
  out.weights = m->hashes.weights;
  out.note = s->weight_cache_note;
  return out;
}

inline void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0);
}

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
