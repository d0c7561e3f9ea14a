// Limits (base/limits.h) and the positions check of a decode request: the
// largest cache length a request reaches, evictions included, may not pass
// the model's max_position_embeddings; `lockstep run` refuses such a
// request with an error naming the limit, before any token is fed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "base/limits.h"
#include "engine/decode.h"
#include "tests/engine/cli_runner.h"

namespace lockstep {
namespace {

using testing::CliOutput;
using testing::RunCli;

DecodeRequest Req(size_t prompt, uint32_t gen, uint32_t max_positions,
                  std::vector<EvictSpec> evictions = {}) {
  DecodeRequest r;
  r.prompt.assign(prompt, 1);
  r.gen = gen;
  r.max_positions = max_positions;
  r.evictions = std::move(evictions);
  return r;
}

TEST(LimitsTest, MaxPositionsTakesTheSmallerBound) {
  EXPECT_EQ(MaxPositions(Limits{}, 8192), 8192u);
  Limits l;
  l.max_positions = 100;
  EXPECT_EQ(MaxPositions(l, 8192), 100u);
  EXPECT_EQ(MaxPositions(l, 16), 16u);
  EXPECT_EQ(MaxPositions(l, 0), 100u);
}

TEST(LimitsTest, OverLimitNamesTheLimitTheValueAndTheBound) {
  const Status st = CheckLimit(ErrorKind::kOverloaded, "sessions_per_worker", "a new session",
                               257, 256);
  EXPECT_EQ(st.kind(), ErrorKind::kOverloaded);
  EXPECT_EQ(st.message(),
            "limit sessions_per_worker: a new session asks for 257, over the limit of 256");
  EXPECT_TRUE(CheckLimit(ErrorKind::kInvalid, "x", "y", 256, 256).ok());
}

TEST(LimitsTest, PositionsAreCheckedOnlyAgainstAKnownBound) {
  int built = 0;
  const auto what = [&] {
    ++built;
    return std::string("a step");
  };
  EXPECT_TRUE(CheckPositions(8, 8, what).ok()) << "up to the bound itself";
  EXPECT_TRUE(CheckPositions(UINT64_MAX, 0, what).ok()) << "0: no bound known";
  EXPECT_EQ(built, 0) << "nothing is built for a step that fits";
  const Status st = CheckPositions(9, 8, what);
  EXPECT_EQ(built, 1);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(st.message(), PositionsOverLimit("a step", 9, 8).message());
  EXPECT_EQ(st.message().rfind("limit max_positions: a step asks for 9, over the limit of 8", 0),
            0u)
      << st.message();
}

TEST(DecodePositionsTest, PromptPlusGeneratedMinusOneMustFit) {
  // P prompt tokens, then gen - 1 fed tokens (the last chosen token is
  // never fed): P + gen - 1 positions.
  EXPECT_TRUE(ValidateDecodeRequest(Req(4, 13, 16)).ok());
  const Status st = ValidateDecodeRequest(Req(4, 14, 16));
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(st.message(),
            "limit max_positions: a request of 4 prompt tokens and 14 to generate asks for 17, "
            "over the limit of 16 positions (the model's max_position_embeddings, or a lower "
            "max_positions)");
  EXPECT_FALSE(ValidateDecodeRequest(Req(17, 1, 16)).ok());
  EXPECT_TRUE(ValidateDecodeRequest(Req(16, 1, 16)).ok());
  EXPECT_TRUE(ValidateDecodeRequest(Req(100, 0, 16)).ok());  // nothing is fed
  // Billions of steps are judged without iterating over them.
  EXPECT_FALSE(ValidateDecodeRequest(Req(4, 4000000000u, 8192)).ok());
}

TEST(DecodePositionsTest, EvictionsMakeRoom) {
  // Steps 0..4 feed 5 tokens (cache 9), step 5 evicts 3 before its feed
  // (6), steps 5..14 feed 10 (16): gen 16 fits 16, gen 17 needs 17.
  EXPECT_TRUE(ValidateDecodeRequest(Req(4, 16, 16, {{0, 3, 5}})).ok());
  EXPECT_FALSE(ValidateDecodeRequest(Req(4, 17, 16, {{0, 3, 5}})).ok());
  // The peak before a late eviction counts: 4 + 14 = 18 > 16 at step 14.
  EXPECT_FALSE(ValidateDecodeRequest(Req(4, 16, 16, {{0, 3, 15}})).ok());
  // Two evictions at one step, listed out of order.
  // 4 + (16 - 1) - 3 = 16 fits; one more step does not.
  EXPECT_TRUE(ValidateDecodeRequest(Req(4, 16, 16, {{0, 1, 7}, {0, 1, 2}, {0, 1, 2}})).ok());
  EXPECT_FALSE(ValidateDecodeRequest(Req(4, 17, 16, {{0, 1, 7}, {0, 1, 2}, {0, 1, 2}})).ok());
}

TEST(DecodePositionsTest, RunRefusesGenerationPastTheModelsPositions) {
  const std::string dir = testing::MakeTempDir("limits") + "/m";
  CliOutput made = RunCli({"make-model", dir, "--seed", "3", "--hidden", "48", "--layers", "2",
                           "--inter", "96", "--vocab", "300"});
  ASSERT_EQ(made.exit_code, 0) << made.err;
  nlohmann::json config;
  std::ifstream(dir + "/config.json") >> config;
  config["max_position_embeddings"] = 16;
  std::ofstream(dir + "/config.json") << config.dump();

  CliOutput over = RunCli({"run", "--model", dir, "--ids", "1,2,3", "--gen", "100"});
  EXPECT_NE(over.exit_code, 0);
  EXPECT_NE(over.err.find("max_position_embeddings"), std::string::npos) << over.err;
  CliOutput sharded =
      RunCli({"run", "--model", dir, "--ids", "1,2,3", "--gen", "15", "--workers", "2"});
  EXPECT_NE(sharded.exit_code, 0);
  EXPECT_NE(sharded.err.find("max_position_embeddings"), std::string::npos) << sharded.err;
  CliOutput fits = RunCli({"run", "--model", dir, "--ids", "1,2,3", "--gen", "14"});
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

}  // namespace
}  // namespace lockstep
