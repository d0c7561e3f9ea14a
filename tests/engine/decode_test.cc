// Decode-level properties: the cached decode equals a full recompute bit
// for bit (§3.5), and two runs in one process agree (§12.4).
#include <gtest/gtest.h>

#include <bit>
#include <cstring>

#include "cli_runner.h"
#include "engine/local_backend.h"
#include "engine/model_loader.h"
#include "engine/ops/fp_env.h"
#include "tests/fixture_absent.h"

namespace lockstep {
namespace {

std::unique_ptr<Stage> LoadWhole(OpenModel& m) {
  auto s = LoadStage(m, StageSpec{0, m.config.num_layers, true, true}, ComputeOptions{"scalar"});
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s->stage);  // one thread: no pool to keep
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

class DecodeTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ops::PinFpEnvironment().ok());
    dir_ = testing::SharedPath("fixtures/conformance/" + GetParam());
    if (dir_.empty()) LOCKSTEP_FIXTURE_ABSENT() << "shared conformance fixtures are absent";
  }
  std::string dir_;
};

TEST_P(DecodeTest, CachedDecodeEqualsFullRecompute) {
  auto model = OpenModelDir(dir_, ModelPins{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto stage = LoadWhole(*model);
  std::vector<uint32_t> seq = {5, 17, 3};
  LocalBackend cached(*stage);
  std::vector<float> logits;
  ASSERT_TRUE(cached.Feed(seq, &logits).ok());
  for (int step = 0; step < 6; ++step) {
    LocalBackend fresh(*stage);
    std::vector<float> full;
    ASSERT_TRUE(fresh.Feed(seq, &full).ok());
    ASSERT_TRUE(SameBits(logits, full)) << "step " << step;
    const uint32_t next = ops::ArgmaxFirst(logits.data(), logits.size());
    seq.push_back(next);
    const uint32_t one[1] = {next};
    ASSERT_TRUE(cached.Feed(one, &logits).ok());
  }
}

TEST_P(DecodeTest, TwoRunsInOneProcessAgree) {
  auto model = OpenModelDir(dir_, ModelPins{});
  ASSERT_TRUE(model.ok());
  auto stage = LoadWhole(*model);
  DecodeRequest req{{1, 2, 3}, 8, {}, 0, {}, std::nullopt};
  LocalBackend a(*stage), b(*stage);
  auto ra = RunDecode(a, req, model->Seed());
  auto rb = RunDecode(b, req, model->Seed());
  ASSERT_TRUE(ra.ok() && rb.ok());
  EXPECT_EQ(ra->cis2_ref, rb->cis2_ref);
  EXPECT_EQ(ra->generated, rb->generated);
  EXPECT_EQ(ra->generated.size(), 8u);
}

// Each step's logits_sha256 equals the sha256 of that step's logits,
// serialised here independently (bits as u32, bytes little-endian).
TEST_P(DecodeTest, PerStepLogitsSha256MatchesTheLogits) {
  auto model = OpenModelDir(dir_, ModelPins{});
  ASSERT_TRUE(model.ok());
  auto stage = LoadWhole(*model);
  DecodeRequest req{{4, 9, 2}, 5, {}, 0, {}, std::nullopt};
  LocalBackend a(*stage);
  auto r = RunDecode(a, req, model->Seed());
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->logits_sha256.size(), 5u);
  LocalBackend b(*stage);
  std::vector<float> logits;
  ASSERT_TRUE(b.Feed(req.prompt, &logits).ok());
  for (size_t step = 0; step < 5; ++step) {
    std::vector<uint8_t> bytes;
    for (float f : logits) {
      const uint32_t u = std::bit_cast<uint32_t>(f);
      for (int k = 0; k < 4; ++k) bytes.push_back(static_cast<uint8_t>(u >> (8 * k)));
    }
    EXPECT_EQ(r->logits_sha256[step], Sha256(bytes)) << "step " << step;
    const uint32_t one[1] = {r->generated[step]};
    ASSERT_TRUE(b.Feed(one, &logits).ok());
  }
  EXPECT_NE(r->logits_sha256[0], r->logits_sha256[1]);
}

TEST_P(DecodeTest, OutOfVocabTokenIsRefused) {
  auto model = OpenModelDir(dir_, ModelPins{});
  ASSERT_TRUE(model.ok());
  auto stage = LoadWhole(*model);
  LocalBackend a(*stage);
  std::vector<float> logits;
  const uint32_t bad[1] = {static_cast<uint32_t>(model->config.vocab_size)};
  const Status st = a.Feed(bad, &logits);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_NE(st.message().find("outside the vocabulary"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Tiny, DecodeTest,
                         ::testing::Values("tiny-llama", "tiny-qwen", "tiny-daz"));

}  // namespace
}  // namespace lockstep
