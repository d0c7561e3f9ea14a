// The weight cache holds a GGUF model's matrices at their own type (Q8_0,
// Q4_0, Q4_K, Q5_K, Q6_K and F16 panels, never widened): a load that reads
// them from the cache decodes bit for bit like a cold load, with the same
// digests, whatever ISA wrote or reads the file; a cache file that is
// truncated, mis-sized, mistyped, has a changed byte in a quantized block
// or its padding, or was made for another file is refused with its reason,
// the stage packed afresh and the file rewritten; and a pipeline stage that
// reads and proves only its parts of the file keeps that proof with a cache.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <tuple>

#include "engine/io/gguf.h"
#include "engine/weight_cache.h"
#include "gguf_fixture.h"
#include "tests/ops/weight_cache_fixture.h"

namespace lockstep::testing {
namespace {

const std::vector<uint32_t> kPrompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};

using Decoded = CacheLoad;

Decoded LoadAndDecode(const std::string& path, const std::string& cache_dir, const std::string& isa = "auto",
                      const StageSpec* stage = nullptr, const ModelPins& pins = {}) {
  return LoadWithCache(path, cache_dir, kPrompt, isa, stage, pins);
}

void ExpectSameDigests(const std::vector<FileDigest>& got, const std::vector<FileDigest>& want) {
  ASSERT_EQ(got.size(), want.size());
  ASSERT_FALSE(want.empty());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].file, want[i].file);
    EXPECT_EQ(got[i].sha256, want[i].sha256) << want[i].file;
  }
}

bool Has(const std::string& note, const std::string& what) { return note.find(what) != std::string::npos; }

// Bytes of the file's matrices (its 2-D tensors) as GGUF stores them.
uint64_t MatrixBytes(const std::string& path) {
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status().ToString();
  uint64_t total = 0;
  for (const GgufTensor& t : file->tensors()) total += t.ne.size() == 2 ? t.nbytes : 0;
  return total;
}

// The resident type each of the file's matrices should be cached as.
std::multiset<int> MatrixTypes(const std::string& path) {
  auto file = GgufFile::Open(path);
  std::multiset<int> out;
  for (const GgufTensor& t : file->tensors()) {
    if (t.ne.size() == 2) {
      out.insert(static_cast<int>(ops::WeightTypeOf(static_cast<ops::GgmlType>(GgmlTypeOf(t.dtype)))));
    }
  }
  return out;
}

TEST(GgufWeightCache, WarmLoadsDecodeExactlyAsColdOnesOnEveryType) {
  for (const char* type : {"q8_0", "q4_k_m", "q6_k", "q5_k", "q4_0", "f16"}) {
    SCOPED_TRACE(type);
    const std::string path = GgufModel(std::string("cache_") + type, type);
    const std::string cache = FreshPath(std::string("gguf_wcache_") + type);
    const Decoded cold = LoadAndDecode(path, "");
    const Decoded first = LoadAndDecode(path, cache);
    EXPECT_TRUE(Has(first.note, "none yet; wrote")) << first.note;
    const Decoded warm = LoadAndDecode(path, cache);
    EXPECT_TRUE(Has(warm.note, "read from")) << warm.note;
    EXPECT_FALSE(Has(warm.note, "wrote")) << warm.note;
    ExpectSameBits(first.logits, cold.logits);
    ExpectSameBits(warm.logits, cold.logits);
    ExpectSameDigests(first.digests, cold.digests);
    ExpectSameDigests(warm.digests, cold.digests);
    // Held at their own type and about their own size, never widened.
    const std::vector<CacheEntry> entries = CacheEntries(ReadBytes(OnlyFile(cache)));
    std::multiset<int> types;
    uint64_t bytes = 0;
    for (const CacheEntry& e : entries) types.insert(e.type), bytes += e.bytes;
    EXPECT_EQ(types, MatrixTypes(path));
    EXPECT_LE(static_cast<double>(bytes), 1.1 * static_cast<double>(MatrixBytes(path)));
    if (std::string(type) == "q4_k_m") {  // the mix: Q4_K with Q6_K for some matrices
      EXPECT_EQ(types.count(static_cast<int>(ops::WeightType::kQ4_K)) > 0 &&
                    types.count(static_cast<int>(ops::WeightType::kQ6_K)) > 0,
                true);
    }
  }
}

// The packed layout is one for every ISA: a file written by one serves all.
TEST(GgufWeightCache, AFileWrittenUnderOneIsaServesEveryOther) {
  const std::string path = GgufModel("cache_isa", "q4_k_m");
  const std::string cache = FreshPath("gguf_wcache_isa");
  const Decoded cold = LoadAndDecode(path, "", "scalar");
  EXPECT_TRUE(Has(LoadAndDecode(path, cache, "scalar").note, "wrote"));
  for (const std::string& isa : ops::AvailableIsas()) {
    SCOPED_TRACE(isa);
    const Decoded warm = LoadAndDecode(path, cache, isa);
    EXPECT_TRUE(Has(warm.note, "read from")) << warm.note;
    ExpectSameBits(warm.logits, cold.logits);
  }
}

// A model, its cold decode, and the cache file a first load wrote.
struct Cached {
  std::string model, cache, file;
  Decoded cold;
  std::vector<uint8_t> good;
};

Cached WithCacheFile(const std::string& tag, const std::string& type) {
  Cached c{GgufModel("hostile_" + tag, type), FreshPath("gguf_hostile_cache_" + tag), "", {}, {}};
  c.cold = LoadAndDecode(c.model, "");
  LoadAndDecode(c.model, c.cache);
  c.file = OnlyFile(c.cache);
  c.good = ReadBytes(c.file);
  return c;
}

// The cache file replaced by `bytes`: the load says `reason`, packs afresh,
// decodes as cold, and leaves the file rewritten as it was.
void ExpectRefusedAndRewritten(const Cached& c, const std::vector<uint8_t>& bytes, const std::string& reason) {
  SCOPED_TRACE(reason);
  WriteBytes(c.file, bytes);
  const Decoded got = LoadAndDecode(c.model, c.cache);
  EXPECT_TRUE(Has(got.note, reason)) << got.note;
  EXPECT_TRUE(Has(got.note, "wrote")) << got.note;
  ExpectSameBits(got.logits, c.cold.logits);
  ExpectSameDigests(got.digests, c.cold.digests);
  EXPECT_EQ(ReadBytes(c.file), c.good);
}

TEST(GgufWeightCache, TruncatedMisSizedOrMistypedFilesAreRefused) {
  const Cached c = WithCacheFile("malformed", "q4_k_m");
  const std::vector<CacheEntry> entries = CacheEntries(c.good);
  const CacheEntry* q4k = nullptr;
  for (const CacheEntry& e : entries) {
    if (e.type == static_cast<int>(ops::WeightType::kQ4_K)) q4k = &e;
  }
  ASSERT_NE(q4k, nullptr);
  struct Damage {
    std::string reason;
    std::function<void(std::vector<uint8_t>&)> apply;
  };
  const std::vector<Damage> damages = {
      {"outside the data", [](auto& b) { b.resize(b.size() - 4096); }},
      {"header of 4096 bytes in a file of 100", [](auto& b) { b.resize(100); }},
      {"shorter than its fixed header", [](auto& b) { b.resize(20); }},
      {"bytes for", [&](auto& b) { b[q4k->type_at + 25] ^= 0x01; }},  // its bytes field
      {"bytes for", [&](auto& b) { b[q4k->type_at + 9] ^= 0x01; }},   // its cols: not whole blocks
      {"bytes for", [&](auto& b) { b[q4k->type_at] = static_cast<uint8_t>(ops::WeightType::kQ6_K); }},
      {"type 9", [&](auto& b) { b[q4k->type_at] = 9; }},
      {"version 1, expected 2", [](auto& b) { b[8] = 1; }},
  };
  for (const Damage& d : damages) {
    std::vector<uint8_t> bytes = c.good;
    d.apply(bytes);
    ExpectRefusedAndRewritten(c, bytes, d.reason);
  }
}

// One changed byte in any quantized matrix — in its first block's scale,
// in its middle, in the last panel's padding rows — is caught.
TEST(GgufWeightCache, AChangedByteInAQuantizedBlockIsCaught) {
  for (const char* type : {"q4_k_m", "q8_0"}) {
    SCOPED_TRACE(type);
    const Cached c = WithCacheFile(std::string("flipped_") + type, type);
    const std::vector<CacheEntry> entries = CacheEntries(c.good);
    std::set<int> types;
    for (const CacheEntry& e : entries) {
      SCOPED_TRACE(e.name);
      types.insert(e.type);
      for (uint64_t at : {e.offset, e.offset + e.bytes / 2 + 17}) {
        std::vector<uint8_t> bytes = c.good;
        bytes[at] ^= 0x01;
        ExpectRefusedAndRewritten(c, bytes, "its " + e.name + " differs from the checkpoint's bytes");
      }
      if (e.rows % 32 != 0) {  // the last byte is row 31 of the last panel: padding
        std::vector<uint8_t> bytes = c.good;
        bytes[e.offset + e.bytes - 1] ^= 0x01;
        ExpectRefusedAndRewritten(c, bytes, "its " + e.name + " differs from the checkpoint's bytes");
      }
    }
    EXPECT_GE(types.size(), std::string(type) == "q4_k_m" ? 2u : 1u);
  }
}

// A well-formed file made for another file: the same shapes and types with
// other bytes (another seed), or the same model at another quantization.
TEST(GgufWeightCache, AFileMadeForAnotherCheckpointIsRefused) {
  const Cached c = WithCacheFile("other", "q4_k_m");
  for (const auto& [tag, type, seed, reason] :
       {std::tuple<const char*, const char*, uint64_t, const char*>{"seed", "q4_k_m", 22, "differs from the checkpoint's bytes"},
        {"quant", "q8_0", 21, "it lacks"}}) {
    SCOPED_TRACE(tag);
    const std::string other = GgufModel(std::string("other_") + tag, type, false, seed);
    const std::string other_cache = FreshPath(std::string("gguf_other_cache_") + tag);
    LoadAndDecode(other, other_cache);
    ExpectRefusedAndRewritten(c, ReadBytes(OnlyFile(other_cache)), reason);
  }
}

// Flips one byte of `path` at `at` in place, keeping its size, inode and
// modification time: its identity, and so its cache file's name, unchanged.
void FlipKeepingIdentity(const std::string& path, uint64_t at) {
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  std::vector<uint8_t> bytes = ReadBytes(path);
  bytes[at] ^= 0x01;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(at));
  f.put(static_cast<char>(bytes[at]));
  f.close();
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
}

uint64_t TensorOffset(const std::string& path, const std::string& name) {
  auto file = GgufFile::Open(path);
  for (const GgufTensor& t : file->tensors()) {
    if (t.name == name) return t.offset + t.nbytes / 2;
  }
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

// A checkpoint changed under an unchanged identity finds its old cache
// file: every matrix is still compared with the bytes just read.
TEST(GgufWeightCache, ACheckpointChangedUnderTheSameIdentityIsCaught) {
  const Cached c = WithCacheFile("same_identity", "q4_k_m");
  FlipKeepingIdentity(c.model, TensorOffset(c.model, "blk.1.ffn_down.weight"));
  const Decoded changed = LoadAndDecode(c.model, "");
  const Decoded got = LoadAndDecode(c.model, c.cache);
  EXPECT_TRUE(Has(got.note, "its model.layers.1.mlp.down_proj.weight differs")) << got.note;
  EXPECT_EQ(OnlyFile(c.cache), c.file);
  ExpectSameBits(got.logits, changed.logits);
  ExpectSameDigests(got.digests, changed.digests);
}

// A pipeline stage opened by its parts (as a worker opens it) reads and
// hashes only those parts with a cache as without; the digests its
// assignment carries still decide, and a part changed under the same file
// identity is refused naming it even though the cache file is found.
TEST(GgufWeightCache, AStageOpenedByItsPartsKeepsItsProofWithACache) {
  const std::string path = GgufModel("parts", "q4_k_m");
  const std::string cache = FreshPath("gguf_parts_cache");
  auto info = InspectModelDir(path, ModelPins{});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const StageSpec spec{1, 3, false, true};
  auto parts = StageWeightFiles(*info, spec);
  ASSERT_TRUE(parts.ok()) << parts.status().ToString();
  ModelPins pins;
  for (const FileDigest& d : *parts) pins.files[d.file] = d.sha256;
  const Decoded plain = LoadAndDecode(path, "", "auto", &spec, pins);
  const Decoded first = LoadAndDecode(path, cache, "auto", &spec, pins);
  const Decoded warm = LoadAndDecode(path, cache, "auto", &spec, pins);
  EXPECT_TRUE(Has(first.note, "wrote")) << first.note;
  EXPECT_TRUE(Has(warm.note, "read from")) << warm.note;
  ExpectSameDigests(plain.digests, *parts);  // only its parts, each as assigned
  ExpectSameDigests(first.digests, *parts);
  ExpectSameDigests(warm.digests, *parts);

  FlipKeepingIdentity(path, TensorOffset(path, "blk.2.ffn_down.weight"));
  auto m = OpenModelDir(path, pins, &spec);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  auto s = LoadStage(*m, spec, ComputeOptions{"auto", 2, WeightFormat::kPackedBf16, cache});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().kind(), ErrorKind::kMismatch) << s.status().ToString();
  EXPECT_TRUE(Has(s.status().message(), "model.gguf:blk.2.ffn_down.weight: sha256 expected"))
      << s.status().ToString();
}

}  // namespace
}  // namespace lockstep::testing
