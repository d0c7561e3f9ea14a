// `lockstep run --weight-cache DIR` as a user runs it: the first run writes
// the cache, the second maps it, and both print the receipt a run without
// a cache prints; a cache file changed on disk is caught, said so on
// stderr, and the receipt is still the checkpoint's.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace lockstep::testing {
namespace {

CliOutput RunDecode(const std::string& model, const std::vector<std::string>& extra) {
  std::vector<std::string> args = {"run", "--model", model, "--ids", "3,1,4,1,5", "--gen", "5",
                                   "--json", "--threads", "2"};
  args.insert(args.end(), extra.begin(), extra.end());
  CliOutput o = RunCli(args);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  return o;
}

TEST(WeightCacheCli, RunsWithTheCacheGiveTheReceiptOfARunWithout) {
  const std::string root = MakeTempDir("weight_cache_cli");
  const std::string model = root + "/m", cache = root + "/cache";
  ASSERT_EQ(RunCli({"make-model", model, "--seed", "4", "--hidden", "64", "--layers", "3",
                    "--heads", "4", "--kv-heads", "2", "--inter", "96", "--vocab", "300",
                    "--shards", "2"})
                .exit_code,
            0);
  const nlohmann::json plain = LastLineJson(RunDecode(model, {}).out);
  ASSERT_TRUE(plain.contains("weights_sha256"));

  const CliOutput first = RunDecode(model, {"--weight-cache", cache});
  EXPECT_NE(first.err.find("wrote"), std::string::npos) << first.err;
  EXPECT_EQ(LastLineJson(first.out), plain);
  const CliOutput second = RunDecode(model, {"--weight-cache", cache});
  EXPECT_NE(second.err.find("read from"), std::string::npos) << second.err;
  EXPECT_EQ(LastLineJson(second.out), plain);

  std::string file;
  for (const auto& e : std::filesystem::directory_iterator(cache)) file = e.path().string();
  ASSERT_FALSE(file.empty());
  std::vector<char> bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  ASSERT_GT(bytes.size(), 8192u);
  bytes[bytes.size() - 8192] ^= 0x10;  // inside the last matrix's bytes
  std::ofstream(file, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  const CliOutput caught = RunDecode(model, {"--weight-cache", cache});
  EXPECT_NE(caught.err.find("differs from the checkpoint's bytes"), std::string::npos) << caught.err;
  EXPECT_EQ(LastLineJson(caught.out), plain);
}

}  // namespace
}  // namespace lockstep::testing
