// A model loaded from a sharded checkpoint computes exactly what the same
// weights in one file compute (every witness digest but weights_sha256 is
// equal), a pipeline stage opens only the shards holding its tensors, and
// a weights file truncated under a loader is an error, not a crash.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "engine/io/synthetic_model.h"
#include "tests/ops/model_fixture.h"

namespace lockstep {
namespace {

using testing::DecodeLogits;
using testing::Load;
using testing::Variant;

SyntheticShape Shape() { return testing::SmallUntiedShape(); }

std::string Scratch(const std::string& name) { return testing::FreshPath("sharded_" + name); }

TEST(ShardedCheckpoint, DecodesBitForBitLikeOneFile) {
  const std::string one = Scratch("one"), three = Scratch("three");
  ASSERT_TRUE(WriteSyntheticModel(one, Shape(), 9, "").ok());
  ASSERT_TRUE(WriteSyntheticModel(three, Shape(), 9, "", 3).ok());
  auto a = OpenModelDir(one, ModelPins{});
  auto b = OpenModelDir(three, ModelPins{});
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_TRUE(b->weights->sharded());
  const std::vector<uint32_t> prompt = {7, 1, 8, 2, 8, 1, 8, 2, 8};
  for (const Variant& v : {Variant{}, Variant{ops::BestKernels().name, 2, WeightFormat::kPackedBf16}}) {
    const std::vector<float> want = DecodeLogits(*Load(*a, v).stage, prompt, 8);
    const std::vector<float> got = DecodeLogits(*Load(*b, v).stage, prompt, 8);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << v.Name();
  }
  // The weights are hashed as they load: the seeds are complete now.
  const WitnessSeed sa = a->Seed(), sb = b->Seed();
  EXPECT_NE(sa.weights_sha256, Digest{});
  EXPECT_NE(sa.weights_sha256, sb.weights_sha256);  // named differently (spec_notes.md)
  EXPECT_EQ(sa.config_sha256, sb.config_sha256);
  EXPECT_EQ(sa.inv_freq_table_digest, sb.inv_freq_table_digest);
}

TEST(ShardedCheckpoint, AStageOpensOnlyTheShardsHoldingItsTensors) {
  const std::string dir = Scratch("stage");
  ASSERT_TRUE(WriteSyntheticModel(dir, Shape(), 9, "", 4).ok());
  auto m = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(m.ok());
  // Shards are cut in tensor-name order: layer 0's tensors come first
  // after lm_head, the embedding is the last.
  const StageSpec first{0, 1, true, false};
  auto part = Checkpoint::Open(m->files.weights_path, StageTensorFilter(m->config, first));
  ASSERT_TRUE(part.ok()) << part.status().ToString();
  EXPECT_LT(part->open_files(), 4u);
  EXPECT_GE(part->open_files(), 1u);
  auto w = LoadStageWeights(*part, m->config, first);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  // Layer 2 is not in the opened shards' view.
  EXPECT_FALSE(LoadStageWeights(*part, m->config, StageSpec{2, 3, false, false}).ok());
}

TEST(ShardedCheckpoint, TruncatedBeforeLoadingIsAnErrorAndTheProcessLives) {
  const std::string dir = Scratch("cut");
  ASSERT_TRUE(WriteSyntheticModel(dir, Shape(), 9, "").ok());
  auto m = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(m.ok());
  const std::string path = dir + "/model.safetensors";
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(std::filesystem::file_size(path) / 2)), 0);
  const StageSpec all{0, 4, true, true};
  for (WeightFormat f : {WeightFormat::kF32Rows, WeightFormat::kPackedBf16}) {
    auto w = LoadStageWeights(*m->weights, m->config, all, f);
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.status().kind(), ErrorKind::kCorrupt) << w.status().ToString();
    EXPECT_NE(w.status().message().find("model.safetensors"), std::string::npos);
    EXPECT_NE(w.status().message().find("truncated"), std::string::npos) << w.status().message();
  }
}

TEST(ShardedCheckpoint, RewrittenWhileLoadingIsAMismatch) {
  const std::string dir = Scratch("touch");
  ASSERT_TRUE(WriteSyntheticModel(dir, Shape(), 9, "").ok());
  auto m = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(m.ok());
  // Same size, new modification time: rewritten in place.
  const auto p = std::filesystem::path(dir) / "model.safetensors";
  std::filesystem::last_write_time(p, std::filesystem::last_write_time(p) + std::chrono::seconds(5));
  auto w = LoadStageWeights(*m->weights, m->config, StageSpec{0, 4, true, true});
  EXPECT_EQ(w.status().kind(), ErrorKind::kMismatch) << w.status().ToString();
  EXPECT_NE(w.status().message().find("changed while it was being loaded"), std::string::npos);
}

}  // namespace
}  // namespace lockstep
