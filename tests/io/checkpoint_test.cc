// Sharded checkpoints (model.safetensors.index.json + shards) against the
// same weights in one file, their errors, and reading files that change
// underneath a reader.
#include "engine/io/checkpoint.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/io/model_config.h"
#include "engine/io/model_files.h"
#include "engine/io/synthetic_model.h"
#include "tests/io/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::ReadAll;
using testing::ScratchDir;

SyntheticShape FourLayers() {
  SyntheticShape s;
  s.layers = 4;
  s.untied = true;
  return s;
}

Checkpoint MustOpen(const std::string& path, const Checkpoint::Filter& filter = {}) {
  auto c = Checkpoint::Open(path, filter);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::string Index(const std::string& dir) { return dir + "/" + kShardIndexFile; }

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(CheckpointTest, ShardedHoldsTheSameTensorsAsOneFile) {
  const std::string root = ScratchDir();
  ASSERT_TRUE(WriteSyntheticModel(root + "/one", FourLayers(), 11, "").ok());
  ASSERT_TRUE(WriteSyntheticModel(root + "/three", FourLayers(), 11, "", 3).ok());
  EXPECT_FALSE(fs::exists(root + "/three/model.safetensors"));
  Checkpoint one = MustOpen(root + "/one/model.safetensors");
  Checkpoint three = MustOpen(Index(root + "/three"));
  EXPECT_FALSE(one.sharded());
  EXPECT_TRUE(three.sharded());
  EXPECT_EQ(three.file_names(),
            (std::vector<std::string>{"model-00001-of-00003.safetensors",
                                      "model-00002-of-00003.safetensors",
                                      "model-00003-of-00003.safetensors"}));
  const auto& file = static_cast<const SafetensorsFile&>(*one.Find("model.norm.weight").file);
  ASSERT_GT(file.tensors().size(), 30u);
  std::map<std::string, std::set<const TensorFile*>> files_of_layer;
  for (const TensorInfo& t : file.tensors()) {
    const TensorRef r = three.Find(t.name);
    ASSERT_NE(r.file, nullptr) << t.name;
    EXPECT_EQ(r.info->shape, t.shape);
    EXPECT_EQ(r.info->dtype, t.dtype);
    EXPECT_EQ(*r.file->ReadBytes(*r.info), *file.ReadBytes(t)) << t.name;
    if (t.name.rfind("model.layers.", 0) == 0) {
      files_of_layer[t.name.substr(0, t.name.find('.', 13))].insert(r.file);
    }
  }
  int spanning = 0;
  for (const auto& [layer, files] : files_of_layer) spanning += files.size() > 1;
  EXPECT_GE(spanning, 1) << "some layer's tensors must span two files";
}

TEST(CheckpointTest, WeightsDigestIsTheDocumentedFunctionOfTheFiles) {
  const std::string dir = ScratchDir() + "/m";
  ASSERT_TRUE(WriteSyntheticModel(dir, FourLayers(), 5, "", 2).ok());
  auto files = LocateModelFiles(dir);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_TRUE(files->sharded);
  Checkpoint c = MustOpen(files->weights_path);
  auto h = HashArtifacts(*files, c, 2);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  // sha256(sha256(index) || sha256(shard 1) || sha256(shard 2)), each
  // digest computed here from the bytes on disk.
  std::vector<uint8_t> cat;
  for (const char* f : {kShardIndexFile, "model-00001-of-00002.safetensors",
                        "model-00002-of-00002.safetensors"}) {
    const Digest d = Sha256(std::span<const uint8_t>(ReadAll(dir + "/" + f)));
    cat.insert(cat.end(), d.begin(), d.end());
  }
  EXPECT_EQ(ToHex(h->weights), ToHex(Sha256(std::span<const uint8_t>(cat))));
  ASSERT_EQ(h->weight_files.size(), 3u);
  EXPECT_EQ(h->weight_files[0].file, kShardIndexFile);

  // A single file keeps sha256(model.safetensors).
  const std::string single = ScratchDir() + "/s";
  ASSERT_TRUE(WriteSyntheticModel(single, FourLayers(), 5, "").ok());
  auto sfiles = LocateModelFiles(single);
  Checkpoint sc = MustOpen(sfiles->weights_path);
  auto sh = HashArtifacts(*sfiles, sc, 1);
  ASSERT_TRUE(sh.ok());
  EXPECT_EQ(ToHex(sh->weights),
            ToHex(Sha256(std::span<const uint8_t>(ReadAll(single + "/model.safetensors")))));
}

TEST(CheckpointTest, FilterOpensOnlyTheFilesHoldingWantedTensors) {
  const std::string dir = ScratchDir();
  ASSERT_TRUE(WriteSyntheticModel(dir, FourLayers(), 5, "", 3).ok());
  Checkpoint c = MustOpen(Index(dir), [](std::string_view n) { return n == "lm_head.weight"; });
  EXPECT_EQ(c.open_files(), 1u);
  EXPECT_EQ(c.file_names().size(), 3u);
  EXPECT_NE(c.Find("lm_head.weight").file, nullptr);
  EXPECT_EQ(c.Find("model.norm.weight").file, nullptr);
  // Partially opened: the per-file digests exist, the whole-checkpoint one does not.
  auto files = LocateModelFiles(dir);
  auto h = HashArtifacts(*files, c, 2);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->weight_files.size(), 2u);  // index + the one shard
  EXPECT_EQ(h->weights, Digest{});
}

TEST(CheckpointTest, MissingShardIsNotFoundNamingIt) {
  const std::string dir = ScratchDir();
  ASSERT_TRUE(WriteSyntheticModel(dir, FourLayers(), 5, "", 2).ok());
  fs::remove(dir + "/model-00002-of-00002.safetensors");
  auto c = Checkpoint::Open(Index(dir));
  EXPECT_EQ(c.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(c.status().message().find("model-00002-of-00002.safetensors"), std::string::npos)
      << c.status().message();
}

TEST(CheckpointTest, IndexNamingATensorItsFileLacksIsCorrupt) {
  const std::string dir = ScratchDir();
  ASSERT_TRUE(WriteSyntheticModel(dir, FourLayers(), 5, "", 2).ok());
  auto index = nlohmann::json::parse(ReadAll(Index(dir)));
  index["weight_map"]["model.layers.9.mlp.up_proj.weight"] = "model-00001-of-00002.safetensors";
  WriteText(Index(dir), index.dump());
  auto c = Checkpoint::Open(Index(dir));
  EXPECT_EQ(c.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(c.status().message().find("model.layers.9.mlp.up_proj.weight"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("model-00001-of-00002.safetensors"), std::string::npos);
}

TEST(CheckpointTest, MalformedIndexesAreCorrupt) {
  const std::string dir = ScratchDir();
  for (const char* text : {"[]", "{}", "{\"weight_map\":{}}", "{\"weight_map\":{\"a\":1}}",
                           "{\"weight_map\":{\"a\":\"../model.safetensors\"}}",
                           "{\"weight_map\":{\"a\":\"/etc/passwd\"}}",
                           "{\"weight_map\":{\"a\":\"..\"}}", "{\"weight_map\":"}) {
    WriteText(Index(dir), text);
    auto c = Checkpoint::Open(Index(dir));
    EXPECT_EQ(c.status().kind(), ErrorKind::kCorrupt) << text << ": " << c.status().ToString();
    EXPECT_NE(c.status().message().find(kShardIndexFile), std::string::npos) << text;
  }
}

TEST(CheckpointTest, ShardShaMismatchNamesTheShard) {
  const std::string dir = ScratchDir();
  ASSERT_TRUE(WriteSyntheticModel(dir, FourLayers(), 5, "", 2).ok());
  auto files = LocateModelFiles(dir);
  Checkpoint c = MustOpen(files->weights_path);
  auto h = HashArtifacts(*files, c, 2);
  ASSERT_TRUE(h.ok());
  const std::string good = ToHex(h->weight_files[1].sha256);
  const std::string bad(64, '0');
  auto pins = ParseManifest(
      nlohmann::json{{"files",
                      {{"model-00001-of-00002.safetensors", good},
                       {"model-00002-of-00002.safetensors", bad}}}}
          .dump(),
      "m.json");
  ASSERT_TRUE(pins.ok()) << pins.status().ToString();
  Status st = VerifyPins(*h, *pins, c.file_names());
  EXPECT_EQ(st.kind(), ErrorKind::kMismatch);
  EXPECT_NE(st.message().find("model-00002-of-00002.safetensors: sha256 expected " + bad),
            std::string::npos)
      << st.message();
  EXPECT_EQ(st.message().find("model-00001"), std::string::npos) << st.message();
  pins->files.erase("model-00002-of-00002.safetensors");
  EXPECT_TRUE(VerifyPins(*h, *pins, c.file_names()).ok());
  pins->files["model-00009-of-00009.safetensors"] = h->weight_files[1].sha256;
  st = VerifyPins(*h, *pins, c.file_names());
  EXPECT_NE(st.message().find("model-00009-of-00009.safetensors: pinned but not part"),
            std::string::npos)
      << st.message();
}

// Sinks for every tensor of `c` collecting its bytes and how often each
// byte arrived.
struct Collected {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::vector<int>> seen;
  std::vector<TensorSink> sinks;
};

void CollectEveryTensor(const Checkpoint& c, const std::vector<std::string>& names,
                        Collected& out) {
  out.bytes.resize(names.size());
  out.seen.resize(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const TensorRef t = c.Find(names[i]);
    ASSERT_NE(t.info, nullptr) << names[i];
    out.bytes[i].assign(t.info->nbytes, 0);
    out.seen[i].assign(t.info->nbytes, 0);
    const uint64_t unit = t.info->shape.size() == 2 ? t.info->nbytes / t.info->shape[0] : 0;
    out.sinks.push_back({t, unit, [&out, i, unit](uint64_t at, std::span<const uint8_t> b) {
                           if (unit != 0) {
                             EXPECT_EQ(b.size() % unit, 0u);
                           }
                           std::copy(b.begin(), b.end(), out.bytes[i].begin() + at);
                           for (size_t k = 0; k < b.size(); ++k) out.seen[i][at + k] += 1;
                         }});
  }
}

TEST(CheckpointTest, ReadAllHandsEveryByteOnceAndHashesEachFile) {
  const std::string dir = ScratchDir() + "/m";
  ASSERT_TRUE(WriteSyntheticModel(dir, FourLayers(), 5, "", 3).ok());
  for (int threads : {1, 3}) {
    SCOPED_TRACE(threads);
    Checkpoint c = MustOpen(Index(dir));
    std::vector<std::string> names = {"lm_head.weight", "model.embed_tokens.weight",
                                      "model.layers.1.mlp.up_proj.weight", "model.norm.weight",
                                      "model.layers.3.input_layernorm.weight"};
    Collected got;
    CollectEveryTensor(c, names, got);
    auto digests = c.ReadAll(got.sinks, threads);
    ASSERT_TRUE(digests.ok()) << digests.status().ToString();
    for (size_t i = 0; i < names.size(); ++i) {
      const TensorRef t = c.Find(names[i]);
      auto want = t.file->ReadBytes(*t.info);
      ASSERT_TRUE(want.ok());
      EXPECT_EQ(got.bytes[i], *want) << names[i];
      EXPECT_EQ(std::count(got.seen[i].begin(), got.seen[i].end(), 1),
                static_cast<std::ptrdiff_t>(got.seen[i].size())) << names[i];
    }
    ASSERT_EQ(digests->size(), 4u);
    for (const FileDigest& d : *digests) {
      EXPECT_EQ(ToHex(d.sha256), ToHex(Sha256(std::span<const uint8_t>(ReadAll(dir + "/" + d.file)))))
          << d.file;
    }
  }
}

TEST(CheckpointTest, ReadAllCutsLargeTensorsIntoWholeRows) {
  const std::string dir = ScratchDir();
  const size_t rows = 5000, cols = 1000;  // 10 MB of bf16: several pieces
  std::vector<uint8_t> data(rows * cols * 2);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + i / 977);
  SafetensorsWriter w;
  w.Add("big", DType::kBF16, {static_cast<int64_t>(rows), static_cast<int64_t>(cols)}, data);
  w.Add("small", DType::kF32, {3}, std::vector<uint8_t>(12, 7));
  ASSERT_TRUE(w.WriteFile(dir + "/model.safetensors").ok());
  for (int threads : {1, 2, 4}) {
    SCOPED_TRACE(threads);
    Checkpoint c = MustOpen(dir + "/model.safetensors");
    Collected got;
    CollectEveryTensor(c, {"big"}, got);
    auto digests = c.ReadAll(got.sinks, threads);
    ASSERT_TRUE(digests.ok()) << digests.status().ToString();
    EXPECT_EQ(got.bytes[0], data);
    EXPECT_EQ(std::count(got.seen[0].begin(), got.seen[0].end(), 1),
              static_cast<std::ptrdiff_t>(data.size()));
    ASSERT_EQ(digests->size(), 1u);
    EXPECT_EQ(ToHex((*digests)[0].sha256),
              ToHex(Sha256(std::span<const uint8_t>(ReadAll(dir + "/model.safetensors")))));
  }
}

TEST(CheckpointTest, ReadAllRefusesOneTensorTwiceAndNamesATruncatedFile) {
  const std::string dir = ScratchDir();
  ASSERT_TRUE(WriteSyntheticModel(dir, FourLayers(), 5, "").ok());
  const std::string path = dir + "/model.safetensors";
  Checkpoint c = MustOpen(path);
  Collected twice;
  CollectEveryTensor(c, {"model.norm.weight", "model.norm.weight"}, twice);
  EXPECT_EQ(c.ReadAll(twice.sinks, 2).status().kind(), ErrorKind::kInvalid);
  ASSERT_EQ(::truncate(path.c_str(), 1000), 0);
  auto r = c.ReadAll({}, 2);
  EXPECT_EQ(r.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
}

TEST(CheckpointTest, FileTruncatedAfterOpenIsAnErrorNotACrash) {
  const std::string dir = ScratchDir();
  ASSERT_TRUE(WriteSyntheticModel(dir, FourLayers(), 5, "").ok());
  const std::string path = dir + "/model.safetensors";
  Checkpoint c = MustOpen(path);
  const TensorRef t = c.Find("model.norm.weight");
  ASSERT_NE(t.file, nullptr);
  ASSERT_EQ(::truncate(path.c_str(), 100), 0);
  auto bytes = t.file->ReadBytes(*t.info);
  EXPECT_EQ(bytes.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(bytes.status().message().find("truncated"), std::string::npos)
      << bytes.status().message();
  EXPECT_NE(bytes.status().message().find("model.norm.weight"), std::string::npos);
  EXPECT_EQ(c.CheckUnchanged().kind(), ErrorKind::kMismatch);
  EXPECT_EQ(t.file->Sha256().status().kind(), ErrorKind::kCorrupt);
}

TEST(CheckpointTest, DirectoriesAndFifosAreNamedForWhatTheyAre) {
  const std::string dir = ScratchDir();
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);
  auto f = SafetensorsFile::Open(dir + "/fifo");  // must not block
  EXPECT_EQ(f.status().kind(), ErrorKind::kIo);
  EXPECT_NE(f.status().message().find("is a FIFO"), std::string::npos) << f.status().message();
  f = SafetensorsFile::Open(dir);
  EXPECT_NE(f.status().message().find("is a directory"), std::string::npos)
      << f.status().message();

  const std::string m = dir + "/m";
  fs::create_directories(m + "/config.json");
  auto files = LocateModelFiles(m);
  EXPECT_EQ(files.status().kind(), ErrorKind::kIo);
  EXPECT_NE(files.status().message().find("config.json: is a directory"), std::string::npos)
      << files.status().message();
  fs::remove(m + "/config.json");
  WriteText(m + "/config.json", "{}");
  ASSERT_EQ(::mkfifo((m + "/model.safetensors").c_str(), 0600), 0);
  files = LocateModelFiles(m);
  EXPECT_NE(files.status().message().find("model.safetensors: is a FIFO"), std::string::npos)
      << files.status().message();
  files = LocateModelFiles(m + "/config.json");
  EXPECT_NE(files.status().message().find("is a regular file, not a model directory"),
            std::string::npos)
      << files.status().message();
}

TEST(CheckpointTest, ConfigSizesAreRangeCheckedBeforeUse) {
  auto base = nlohmann::json::parse(SyntheticConfigJson(SyntheticShape{}));
  for (const char* key : {"num_hidden_layers", "hidden_size", "vocab_size",
                          "intermediate_size", "num_attention_heads",
                          "max_position_embeddings"}) {
    for (int64_t v : {int64_t{2147483647}, int64_t{1000000000}}) {
      nlohmann::json j = base;
      j[key] = v;
      auto c = ParseModelConfig(j.dump(), "config.json");
      EXPECT_EQ(c.status().kind(), ErrorKind::kInvalid) << key << "=" << v;
      EXPECT_NE(c.status().message().find(std::string("\"") + key + "\": must be in [1, "),
                std::string::npos)
          << c.status().message();
    }
  }
  nlohmann::json j = base;
  j["num_hidden_layers"] = 1e9;  // not an integer
  EXPECT_EQ(ParseModelConfig(j.dump(), "c").status().kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep
