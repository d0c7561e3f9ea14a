// The weight cache changes how weights load, never what they are: a stage
// whose matrices are read from a cache file decodes bit for bit like one
// packed from the checkpoint, with the same weight digests; a cache file
// whose bytes differ from the checkpoint's, or that is malformed in any
// way, is refused with a reason, the stage is packed afresh and the file
// rewritten; and the comparison itself notices one changed element.
#include "engine/weight_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <future>
#include <random>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine/io/synthetic_model.h"
#include "tests/ops/weight_cache_fixture.h"
#include "tests/ops/model_fixture.h"
#include "tests/ops/random_blocks.h"

namespace lockstep {
namespace {

using testing::DecodeLogits;
using testing::OnlyFile;
using testing::U64At;
constexpr auto& ReadFile = testing::ReadBytes;
constexpr auto& WriteFile = testing::WriteBytes;

SyntheticShape Shape() { return testing::SmallUntiedShape(); }

std::string Scratch(const std::string& name) { return testing::FreshPath("weight_cache_" + name); }

const std::vector<uint32_t> kPrompt = {7, 1, 8, 2, 8, 1, 8, 2, 8};

using Loaded = testing::CacheLoad;
using testing::ExpectSameBits;

Loaded LoadAndDecode(const std::string& model_dir, const std::string& cache_dir,
                     const StageSpec* stage = nullptr) {
  return testing::LoadWithCache(model_dir, cache_dir, kPrompt, "auto", stage);
}

// A model, its decode without a cache, and the cache file a first load
// with a cache wrote.
struct CachedModel {
  std::string model, cache, file;
  Loaded plain;
};

CachedModel WithCacheFile(const std::string& name) {
  CachedModel c{Scratch(name), Scratch(name + "_cache"), "", {}};
  EXPECT_TRUE(WriteSyntheticModel(c.model, Shape(), 9, "").ok());
  c.plain = LoadAndDecode(c.model, "");
  LoadAndDecode(c.model, c.cache);
  c.file = OnlyFile(c.cache);
  return c;
}

TEST(WeightCache, CachedMatricesDecodeLikePackedOnes) {
  const std::string model = Scratch("model"), cache = Scratch("cache");
  ASSERT_TRUE(WriteSyntheticModel(model, Shape(), 9, "").ok());
  const Loaded plain = LoadAndDecode(model, "");
  const Loaded first = LoadAndDecode(model, cache);
  EXPECT_NE(first.note.find("none yet; wrote"), std::string::npos) << first.note;
  const Loaded cached = LoadAndDecode(model, cache);
  EXPECT_NE(cached.note.find("read from"), std::string::npos) << cached.note;
  EXPECT_EQ(cached.note.find("wrote"), std::string::npos) << cached.note;
  ExpectSameBits(first.logits, plain.logits);
  ExpectSameBits(cached.logits, plain.logits);
  EXPECT_EQ(cached.weights, plain.weights);
}

TEST(WeightCache, EachStageOfAShardedCheckpointHasItsOwnFile) {
  const std::string model = Scratch("sharded"), cache = Scratch("sharded_cache");
  ASSERT_TRUE(WriteSyntheticModel(model, Shape(), 9, "", 3).ok());
  const StageSpec a{0, 2, true, false}, b{2, 4, false, true};
  EXPECT_NE(LoadAndDecode(model, cache, &a).note.find("wrote"), std::string::npos);
  EXPECT_NE(LoadAndDecode(model, cache, &b).note.find("wrote"), std::string::npos);
  EXPECT_NE(LoadAndDecode(model, cache, &a).note.find("read from"), std::string::npos);
  EXPECT_NE(LoadAndDecode(model, cache, &b).note.find("read from"), std::string::npos);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(cache), {}), 2);
}

TEST(WeightCache, ABitThatDiffersFromTheCheckpointIsCaughtAndTheFileRewritten) {
  const CachedModel c = WithCacheFile("tampered");
  const std::string &model = c.model, &cache = c.cache, &file = c.file;
  const Loaded& plain = c.plain;
  std::vector<uint8_t> bytes = ReadFile(file);
  const uint64_t data = U64At(bytes, 16);
  bytes[data + 1000] ^= 0x01;  // one mantissa bit of the first matrix
  WriteFile(file, bytes);
  const Loaded caught = LoadAndDecode(model, cache);
  EXPECT_NE(caught.note.find("differs from the checkpoint's bytes"), std::string::npos) << caught.note;
  EXPECT_NE(caught.note.find("wrote"), std::string::npos) << caught.note;
  ExpectSameBits(caught.logits, plain.logits);
  const Loaded again = LoadAndDecode(model, cache);
  EXPECT_NE(again.note.find("read from"), std::string::npos) << again.note;
  ExpectSameBits(again.logits, plain.logits);
}

TEST(WeightCache, MalformedFilesAreRefusedWithTheirReason) {
  const CachedModel c = WithCacheFile("malformed");
  const std::string &model = c.model, &cache = c.cache, &file = c.file;
  const Loaded& plain = c.plain;
  const std::vector<uint8_t> good = ReadFile(file);
  const uint16_t name_len = static_cast<uint16_t>(good[24] | good[25] << 8);
  const size_t first_offset = 24 + 2 + name_len + 1 + 16;  // entry 0's offset field
  struct Damage {
    const char* reason;
    std::function<void(std::vector<uint8_t>&)> apply;
  };
  const std::vector<Damage> damages = {
      {"shorter than its fixed header", [](auto& b) { b.resize(10); }},
      {"bad magic", [](auto& b) { b[0] = 'X'; }},
      {"version 7", [](auto& b) { b[8] = 7; }},
      {"entries", [](auto& b) { b[15] = 0x7f; }},
      {"outside the data", [&](auto& b) { b[first_offset + 6] = 0x10; }},
      {"outside the data", [](auto& b) { b.resize(b.size() - 4096); }},
      {"bytes for", [&](auto& b) { b[first_offset - 8] ^= 0x01; }},  // entry 0's cols
      {"bad name length", [](auto& b) { b[24] = 0, b[25] = 0; }},
      {"header of 0 bytes", [](auto& b) { std::fill(b.begin() + 16, b.begin() + 24, 0); }},
      {"header of 4097 bytes", [](auto& b) { b[16] = 1, b[17] = 0x10, b[18] = b[19] = 0; }},
  };
  for (const Damage& d : damages) {
    std::vector<uint8_t> bytes = good;
    d.apply(bytes);
    WriteFile(file, bytes);
    const Loaded got = LoadAndDecode(model, cache);
    EXPECT_NE(got.note.find(d.reason), std::string::npos) << got.note;
    EXPECT_NE(got.note.find("wrote"), std::string::npos) << got.note;
    ExpectSameBits(got.logits, plain.logits);
    EXPECT_EQ(ReadFile(file), good) << d.reason;  // rewritten as it was
  }
}

// A stage loaded (with `cache_dir`, or none), then decoded after `change`
// did something to the files it was loaded from: the decode must be the
// checkpoint's, whatever happened.
std::vector<float> DecodeAfter(const std::string& model, const std::string& cache_dir,
                               const std::function<void()>& change) {
  auto m = OpenModelDir(model, ModelPins{});
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  if (!m.ok()) return {};
  const StageSpec all{0, m->config.num_layers, true, true};
  ComputeOptions compute{ops::BestKernels().name, 2, WeightFormat::kPackedBf16, cache_dir};
  auto s = LoadStage(*m, all, compute);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  if (!s.ok()) return {};
  if (!cache_dir.empty()) {
    EXPECT_NE(s->weight_cache_note.find("read from"), std::string::npos) << s->weight_cache_note;
  }
  change();
  return DecodeLogits(**s, kPrompt, 6);
}

std::vector<float> DecodeAfter(const CachedModel& c, const std::function<void()>& change) {
  return DecodeAfter(c.model, c.cache, change);
}

// Every byte of `path` from `from` on XORed with 0x5a, written in place
// (same inode, same size).
void OverwriteInPlace(const std::string& path, size_t from) {
  std::vector<uint8_t> bytes = ReadFile(path);
  for (size_t i = from; i < bytes.size(); ++i) bytes[i] ^= 0x5a;
  const int fd = ::open(path.c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0), static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

// Overwriting the file in place (same size, same inode, every data byte
// changed) after the load does not reach the loaded stage.
TEST(WeightCache, AFileOverwrittenInPlaceAfterTheLoadChangesNothing) {
  const CachedModel c = WithCacheFile("overwritten");
  const std::vector<float> got = DecodeAfter(c, [&] { OverwriteInPlace(c.file, U64At(ReadFile(c.file), 16)); });
  ExpectSameBits(got, c.plain.logits);
}

// The checkpoint itself is read, never mapped: overwriting or truncating it
// after the load changes nothing either (a file truncated during the load
// is an error naming it: tests/io/checkpoint_test.cc).
TEST(WeightCache, ACheckpointChangedAfterTheLoadChangesNothing) {
  const CachedModel c = WithCacheFile("checkpoint_changed");
  const std::string weights = c.model + "/model.safetensors";
  ExpectSameBits(DecodeAfter(c.model, "", [&] { OverwriteInPlace(weights, 4096); }), c.plain.logits);
  ASSERT_TRUE(WriteSyntheticModel(c.model, Shape(), 9, "").ok());
  ExpectSameBits(DecodeAfter(c.model, "", [&] { ASSERT_EQ(::truncate(weights.c_str(), 100), 0); }),
                 c.plain.logits);
}

// Truncating it after the load is no SIGBUS, and changes nothing either.
TEST(WeightCache, AFileTruncatedAfterTheLoadChangesNothing) {
  const CachedModel c = WithCacheFile("truncated");
  const std::vector<float> got = DecodeAfter(c, [&] { ASSERT_EQ(::truncate(c.file.c_str(), 4096), 0); });
  ExpectSameBits(got, c.plain.logits);
}

// A FIFO where the cache file should be is refused by what it is, without
// waiting for a writer; the stage is packed afresh and the FIFO replaced.
TEST(WeightCache, AFifoInItsPlaceIsRefusedWithoutBlocking) {
  const CachedModel c = WithCacheFile("fifo");
  std::filesystem::remove(c.file);
  ASSERT_EQ(::mkfifo(c.file.c_str(), 0600), 0);
  std::future<Loaded> load = std::async(std::launch::async, [&] { return LoadAndDecode(c.model, c.cache); });
  if (load.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
    ADD_FAILURE() << "the load is blocked on the FIFO";
    const int unblock = ::open(c.file.c_str(), O_WRONLY | O_NONBLOCK);  // lets it go on
    if (unblock >= 0) ::close(unblock);
  }
  const Loaded got = load.get();
  EXPECT_NE(got.note.find("FIFO"), std::string::npos) << got.note;
  EXPECT_NE(got.note.find("wrote"), std::string::npos) << got.note;
  ExpectSameBits(got.logits, c.plain.logits);
  struct stat st {};
  ASSERT_EQ(::stat(c.file.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
}

TEST(WeightCache, RandomFilesNeverOpen) {
  const std::string dir = Scratch("random");
  std::filesystem::create_directories(dir);
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    std::vector<uint8_t> bytes(rng() % 9000);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    if (bytes.size() >= 8 && i % 2 == 0) std::memcpy(bytes.data(), "LSPACKv1", 8);
    if (bytes.size() >= 12 && i % 4 == 0) bytes[8] = 1, bytes[9] = bytes[10] = bytes[11] = 0;
    WriteFile(dir + "/f", bytes);
    EXPECT_FALSE(WeightCache::Open(dir + "/f").ok()) << "file " << i;
  }
  EXPECT_EQ(WeightCache::Open(dir + "/absent").status().kind(), ErrorKind::kNotFound);
}

// The comparison a cached matrix goes through, on every type: true for
// every piece of the rows it was packed from (whole panels, parts of
// panels), false for exactly the pieces holding one changed byte, wherever
// that byte is in its row (so every bit of a block counts); and the
// padding rows of the last panel must be zero.
TEST(WeightCache, SameAsRowsNoticesOneByteOfEveryType) {
  std::mt19937 rng(3);
  const std::vector<std::pair<size_t, size_t>> pieces = {{0, 70}, {0, 32}, {32, 38}, {5, 40}, {69, 1}, {31, 2}};
  for (ops::WeightType t : {ops::WeightType::kF32, ops::WeightType::kBf16, ops::WeightType::kF16,
                            ops::WeightType::kQ8_0, ops::WeightType::kQ4_0, ops::WeightType::kQ4_K,
                            ops::WeightType::kQ5_K, ops::WeightType::kQ6_K}) {
    const ops::GgmlBlock& block = ops::BlockOf(ops::GgmlTypeOf(t));
    SCOPED_TRACE(block.name);
    const size_t rows = 70, cols = block.elems == 1 ? 37 : 2 * block.elems;
    const size_t row_bytes = ops::GgmlRowBytes(block.type, cols);
    std::vector<uint8_t> bytes = ops::testing::RandomBlocks(rng, block.type, rows * cols / block.elems);
    ops::PackedMatrix m = ops::PackedMatrix::Allocated(rows, cols, t);
    m.PackRows(0, bytes);
    auto same = [&](size_t r0, size_t n) {
      return m.SameAsRows(r0, std::span(bytes).subspan(r0 * row_bytes, n * row_bytes));
    };
    for (const auto& [r0, n] : pieces) EXPECT_TRUE(same(r0, n)) << "rows [" << r0 << ", " << r0 + n << ")";
    EXPECT_TRUE(m.PaddingIsZero());
    const size_t changed_row = 33;
    for (size_t at = 0; at < row_bytes; at += 1 + at % 3) {
      bytes[changed_row * row_bytes + at] ^= 0x10;
      for (const auto& [r0, n] : pieces) {
        const bool holds = r0 <= changed_row && changed_row < r0 + n;
        EXPECT_EQ(same(r0, n), !holds) << "byte " << at << ", rows [" << r0 << ", " << r0 + n << ")";
      }
      bytes[changed_row * row_bytes + at] ^= 0x10;
    }
    // A view of the stored bytes whose last byte is changed: it belongs to
    // row 31 of the last panel (every type's layout ends with a k-row or a
    // group row of the panel's 32 rows), row 95 here, a padding row.
    std::vector<uint8_t> stored(m.stored().begin(), m.stored().end());
    const ops::PackedMatrix view = ops::PackedMatrix::View(nullptr, stored.data(), rows, cols, t);
    EXPECT_TRUE(view.PaddingIsZero());
    stored.back() ^= 0x01;
    EXPECT_FALSE(view.PaddingIsZero());
    EXPECT_TRUE(view.SameAsRows(0, bytes));  // the real rows are untouched
  }
}

}  // namespace
}  // namespace lockstep
