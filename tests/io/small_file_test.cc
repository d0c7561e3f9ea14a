// Small files an operator names (config.json, tokenizer.json, cluster
// configs, receipts, manifests) are read through base/read_only_file.h's
// ReadSmallFile: a FIFO or directory in a file's place is refused at once by
// name instead of hanging the reader, and an oversized file is refused
// before it is read.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "base/read_only_file.h"
#include "base/sha256.h"
#include "engine/io/model_config.h"

namespace lockstep {
namespace {

class SmallFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("small_file_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const char* name) const { return (dir_ / name).string(); }

  std::filesystem::path dir_;
};

TEST_F(SmallFileTest, ReadsARegularFileWhole) {
  std::ofstream(Path("a.json")) << "{\"x\": 1}";
  Result<std::string> text = ReadSmallFile(Path("a.json"), 100, "a test file");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "{\"x\": 1}");
}

TEST_F(SmallFileTest, AFifoInAFilesPlaceIsRefusedAtOnceByName) {
  ASSERT_EQ(::mkfifo(Path("config.json").c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  Result<ModelConfig> cfg = LoadModelConfig(Path("config.json"));
  Result<Digest> hash = Sha256File(Path("config.json"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ASSERT_FALSE(cfg.ok());
  EXPECT_NE(cfg.status().message().find("config.json: is a FIFO"), std::string::npos)
      << cfg.status().ToString();
  ASSERT_FALSE(hash.ok());
  EXPECT_NE(hash.status().message().find("a FIFO"), std::string::npos) << hash.status().ToString();
}

TEST_F(SmallFileTest, ADirectoryInAFilesPlaceIsRefusedByName) {
  std::filesystem::create_directories(Path("tokenizer.json"));
  Result<std::string> text = ReadSmallFile(Path("tokenizer.json"), 100, "a tokenizer file");
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("a directory"), std::string::npos)
      << text.status().ToString();
}

TEST_F(SmallFileTest, AFileOverTheLimitIsRefusedNamingTheLimit) {
  std::ofstream(Path("big.json")) << std::string(101, ' ');
  Result<std::string> text = ReadSmallFile(Path("big.json"), 100, "a test file");
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(text.status().message().find("101 bytes is over the limit of 100 for a test file"),
            std::string::npos)
      << text.status().ToString();
}

TEST_F(SmallFileTest, AMissingFileIsNotFound) {
  EXPECT_EQ(ReadSmallFile(Path("absent.json"), 100, "x").status().kind(), ErrorKind::kNotFound);
}

}  // namespace
}  // namespace lockstep
