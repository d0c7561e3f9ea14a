#include "engine/io/model_files.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "tests/fixture_absent.h"
#include "tests/io/test_util.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;
using testing::ScratchDir;
using testing::SharedPath;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// A model folder with small stand-in files.
std::string FakeModel(bool with_tokenizer) {
  std::string dir = ScratchDir() + "/model";
  fs::create_directories(dir);
  WriteText(dir + "/config.json", "{}");
  SafetensorsWriter w;
  w.Add("x", DType::kU8, {7}, {'w', 'e', 'i', 'g', 'h', 't', 's'});
  EXPECT_TRUE(w.WriteFile(dir + "/model.safetensors").ok());
  if (with_tokenizer) WriteText(dir + "/tokenizer.json", "tok");
  return dir;
}

// The artifact hashes of a located folder, its checkpoint opened whole.
Result<ArtifactHashes> Hash(const ModelFiles& files) {
  LOCKSTEP_ASSIGN_OR_RETURN(Checkpoint c, Checkpoint::Open(files.weights_path));
  return HashArtifacts(files, c, 2);
}

TEST(ModelFilesTest, ConformanceHashesEqualTheIndependentVectors) {
  std::string vectors_path = SharedPath("fixtures/conformance/vectors.json");
  if (!testing::Exists(vectors_path)) LOCKSTEP_FIXTURE_ABSENT() << "absent: " << vectors_path;
  auto vectors = nlohmann::json::parse(std::ifstream(vectors_path));
  int checked = 0;
  for (const auto& c : vectors["cases"]) {
    const auto& e = c["expect"];
    std::string dir = SharedPath("fixtures/conformance/" + c["model"].get<std::string>());
    auto files = LocateModelFiles(dir);
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    EXPECT_TRUE(files->has_tokenizer);
    auto h = Hash(*files);
    ASSERT_TRUE(h.ok()) << h.status().ToString();
    EXPECT_EQ(ToHex(h->weights), e["weights_sha256"].get<std::string>()) << dir;
    EXPECT_EQ(ToHex(h->tokenizer), e["tokenizer_sha256"].get<std::string>()) << dir;
    EXPECT_EQ(ToHex(h->config), e["config_sha256"].get<std::string>()) << dir;
    // The same values as a manifest verify.
    nlohmann::json m = {{"weights_sha256", e["weights_sha256"]},
                        {"tokenizer_sha256", e["tokenizer_sha256"]},
                        {"config_sha256", e["config_sha256"]}};
    auto pins = ParseManifest(m.dump(), "manifest.json");
    ASSERT_TRUE(pins.ok()) << pins.status().ToString();
    EXPECT_TRUE(VerifyPins(*h, *pins).ok());
    ++checked;
  }
  EXPECT_GE(checked, 3);
}

TEST(ModelFilesTest, BuiltinSmolLM2PinsMatchTheFixtureFiles) {
  auto pins = BuiltinPins("smollm2-135m");
  ASSERT_TRUE(pins.has_value());
  EXPECT_EQ(ToHex(*pins->weights),
            "80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1");
  EXPECT_FALSE(BuiltinPins("smollm2-360m").has_value());
  std::string cfg = SharedPath("fixtures/smollm2-135m/config.json");
  std::string tok = SharedPath("fixtures/smollm2-135m/tokenizer.json");
  if (!testing::Exists(cfg) || !testing::Exists(tok)) LOCKSTEP_FIXTURE_ABSENT() << "fixtures absent";
  EXPECT_EQ(ToHex(*Sha256File(cfg)), ToHex(*pins->config));
  EXPECT_EQ(ToHex(*Sha256File(tok)), ToHex(*pins->tokenizer));
}

TEST(ModelFilesTest, PinMismatchIsRefusedNamingFileAndBothHashes) {
  std::string dir = FakeModel(true);
  auto files = LocateModelFiles(dir);
  ASSERT_TRUE(files.ok());
  auto h = Hash(*files);
  ASSERT_TRUE(h.ok());
  ModelPins pins;
  pins.name = "test-pins";
  pins.weights = *Sha256File(dir + "/model.safetensors");
  pins.config = Sha256(std::string_view("{ }"));  // differs from "{}"
  Status st = VerifyPins(*h, pins);
  EXPECT_EQ(st.kind(), ErrorKind::kMismatch);
  EXPECT_NE(st.message().find("config.json"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find(ToHex(*pins.config)), std::string::npos);
  EXPECT_NE(st.message().find(ToHex(Sha256(std::string_view("{}")))), std::string::npos);
  EXPECT_EQ(st.message().find("model.safetensors"), std::string::npos) << "weights matched";
  EXPECT_NE(st.message().find("test-pins"), std::string::npos);

  // Built-in SmolLM2 pins refuse this folder on all three files.
  st = VerifyPins(*h, *BuiltinPins("smollm2-135m"));
  EXPECT_EQ(st.kind(), ErrorKind::kMismatch);
  for (const char* f : {"model.safetensors", "tokenizer.json", "config.json"}) {
    EXPECT_NE(st.message().find(f), std::string::npos) << st.message();
  }
}

TEST(ModelFilesTest, AbsentTokenizerHashesAsEmptyString) {
  auto files = LocateModelFiles(FakeModel(false));
  ASSERT_TRUE(files.ok());
  EXPECT_FALSE(files->has_tokenizer);
  EXPECT_EQ(files->tokenizer_path, "");
  auto h = Hash(*files);
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(ToHex(h->tokenizer),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  ModelPins pins;
  pins.tokenizer = Sha256(std::string_view("tok"));
  Status st = VerifyPins(*h, pins);
  EXPECT_EQ(st.kind(), ErrorKind::kMismatch);
  EXPECT_NE(st.message().find("tokenizer.json"), std::string::npos);
  EXPECT_TRUE(VerifyPins(*h, ModelPins{}).ok()) << "nothing pinned";
}

TEST(ModelFilesTest, LocateErrorsNameThePath) {
  std::string dir = ScratchDir();
  auto r = LocateModelFiles(dir + "/nope");
  EXPECT_EQ(r.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(r.status().message().find("nope"), std::string::npos);
  r = LocateModelFiles(dir);
  EXPECT_EQ(r.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(r.status().message().find("config.json"), std::string::npos);
  WriteText(dir + "/config.json", "{}");
  r = LocateModelFiles(dir);
  EXPECT_EQ(r.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(r.status().message().find("model.safetensors"), std::string::npos);
  fs::create_directories(dir + "/model.safetensors");  // a directory, not a file
  r = LocateModelFiles(dir);
  EXPECT_EQ(r.status().kind(), ErrorKind::kIo);
  EXPECT_NE(r.status().message().find("model.safetensors: is a directory"), std::string::npos)
      << r.status().message();
}

TEST(ModelFilesTest, ManifestParsing) {
  const std::string a(64, 'a');
  auto ok = ParseManifest("{\"config_sha256\":\"" + a + "\"}", "m.json");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ToHex(*ok->config), a);
  EXPECT_FALSE(ok->weights.has_value());
  EXPECT_FALSE(ok->tokenizer.has_value());
  EXPECT_EQ(ok->name, "m.json");

  struct Bad { const char* name; std::string text; const char* mention; };
  const Bad bad[] = {
      {"not_json", "{", "m.json"},
      {"not_object", "[]", "m.json"},
      {"unknown_key", "{\"weights\":\"" + a + "\"}", "weights"},
      {"short_hex", "{\"weights_sha256\":\"abcd\"}", "weights_sha256"},
      {"non_hex", "{\"weights_sha256\":\"" + std::string(64, 'g') + "\"}", "weights_sha256"},
      {"number", "{\"tokenizer_sha256\":5}", "tokenizer_sha256"},
      {"null", "{\"config_sha256\":null}", "config_sha256"},
      {"duplicate", "{\"config_sha256\":\"" + a + "\",\"config_sha256\":\"" + a + "\"}",
       "config_sha256"},
  };
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.name);
    auto r = ParseManifest(b.text, "m.json");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().kind(), ErrorKind::kInvalid);
    EXPECT_NE(r.status().message().find("m.json"), std::string::npos);
    EXPECT_NE(r.status().message().find(b.mention), std::string::npos) << r.status().message();
  }
}

TEST(ModelFilesTest, LoadManifestFromFile) {
  std::string dir = ScratchDir();
  EXPECT_EQ(LoadManifest(dir + "/absent.json").status().kind(), ErrorKind::kNotFound);
  WriteText(dir + "/m.json", "{\"weights_sha256\":\"" + std::string(64, 'F') + "\"}");
  auto m = LoadManifest(dir + "/m.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(ToHex(*m->weights), std::string(64, 'f'));
  EXPECT_EQ(m->name, dir + "/m.json");
}

}  // namespace
}  // namespace lockstep
