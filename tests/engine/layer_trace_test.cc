// The receipts' trace mode in the engine: a traced LocalBackend's digest
// of layer L at step s is the sha256 of what a separate Stage holding only
// layers [0, L] computes for the same feed (each float's bits as u32 LE,
// serialised here byte by byte), and an untraced decode records none.
#include <gtest/gtest.h>

#include <bit>

#include "cli_runner.h"
#include "engine/local_backend.h"
#include "engine/model_loader.h"
#include "engine/ops/fp_env.h"
#include "tests/fixture_absent.h"

namespace lockstep {
namespace {

Digest BytesSha256(const std::vector<float>& v) {
  std::vector<uint8_t> bytes;
  for (float f : v) {
    const uint32_t u = std::bit_cast<uint32_t>(f);
    for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<uint8_t>(u >> (8 * k)));
  }
  return Sha256(bytes);
}

TEST(LayerTraceTest, DigestsAreThePrefixStagesOutputs) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string dir = testing::SharedPath("fixtures/conformance/tiny-llama");
  if (dir.empty()) LOCKSTEP_FIXTURE_ABSENT() << "shared conformance fixtures are absent";
  auto model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const int layers = model->config.num_layers;
  auto whole = LoadStage(*model, StageSpec{0, layers, true, true}, ComputeOptions{"scalar"});
  ASSERT_TRUE(whole.ok());
  const DecodeRequest req{{4, 9, 2}, 3, {}, 0, {}, std::nullopt};
  LocalBackend traced(*whole->stage);
  traced.EnableTrace();
  auto r = RunDecode(traced, req, model->Seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->layer_digests.size(), 3u);

  for (int l = 0; l < layers; ++l) {
    auto prefix = LoadStage(*model, StageSpec{0, l + 1, true, false}, ComputeOptions{"scalar"});
    ASSERT_TRUE(prefix.ok()) << prefix.status().ToString();
    const Stage& st = *prefix->stage;
    KvCache cache = st.NewCache();
    ForwardScratch scratch;
    std::vector<float> hidden;
    for (size_t step = 0; step < 2; ++step) {
      const std::vector<uint32_t> feed =
          step == 0 ? req.prompt : std::vector<uint32_t>{r->generated[step - 1]};
      ASSERT_TRUE(st.Embed(feed, &hidden).ok());
      ASSERT_TRUE(st.Forward(hidden, static_cast<int64_t>(cache.size()), cache, scratch).ok());
      EXPECT_EQ(r->layer_digests[step][static_cast<size_t>(l)], BytesSha256(hidden))
          << "step " << step << " layer " << l;
    }
  }
  EXPECT_NE(r->layer_digests[0][0], r->layer_digests[1][0]);

  LocalBackend plain(*whole->stage);
  auto untraced = RunDecode(plain, req, model->Seed());
  ASSERT_TRUE(untraced.ok());
  EXPECT_TRUE(untraced->layer_digests.empty());
  EXPECT_EQ(untraced->logits_sha256, r->logits_sha256);
}

}  // namespace
}  // namespace lockstep
