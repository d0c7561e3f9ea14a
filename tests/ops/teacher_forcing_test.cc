// Teacher forcing (engine/teacher_forcing.h) equals a decode replay: fed
// the tokens a plain decode chose, every step's token, logits sha256 and
// layer digests, the witness chain and the argmax digest are RunDecode's,
// for greedy, sampled, windowed, evicting, long and traced decodes on the
// scalar and dispatched kernels, 1 and 2 threads. Claims that differ end
// the recomputation at the first differing step, which holds the model's
// own choice there, as a replay's does.
#include <gtest/gtest.h>

#include "decode_cases.h"
#include "engine/io/synthetic_model.h"
#include "engine/teacher_forcing.h"
#include "model_fixture.h"

namespace lockstep::testing {
namespace {

class TeacherForcing : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(FreshPath("teacher_forcing"));
    SyntheticShape s = SmallUntiedShape();
    s.vocab = 300;
    ASSERT_TRUE(WriteSyntheticModel(*dir_, s, 11, "").ok());
  }
  static std::string* dir_;
};
std::string* TeacherForcing::dir_ = nullptr;

TEST_F(TeacherForcing, EqualsDecodeReplayOnEveryKindOfDecode) {
  auto model = OpenModelDir(*dir_, ModelPins{});
  ASSERT_TRUE(model.ok());
  for (const Variant& v : {Variant{}, Variant{"auto", 2, WeightFormat::kPackedBf16}}) {
    Loaded l = Load(*model, v);
    for (const DecodeCase& c : DecodeCases()) {
      SCOPED_TRACE(v.Name() + " " + c.name);
      auto plain = RunDecode(*OpenBackend(*l.stage, c), c.req, model->Seed());
      ASSERT_TRUE(plain.ok()) << plain.status().ToString();
      auto forced = TeacherForce(*OpenBackend(*l.stage, c), c.req, plain->generated, 300, model->Seed());
      ASSERT_TRUE(forced.ok()) << forced.status().ToString();
      ExpectSameResult(*forced, *plain);
    }
  }
}

// A claimed token changed at step s (to another id, or to one outside the
// vocabulary): the recomputation holds steps 0..s, equal to the replay's.
TEST_F(TeacherForcing, EndsAtTheFirstDifferingStep) {
  auto model = OpenModelDir(*dir_, ModelPins{});
  ASSERT_TRUE(model.ok());
  Loaded l = Load(*model, Variant{"auto", 2, WeightFormat::kPackedBf16});
  for (const DecodeCase& c : DecodeCases()) {
    auto plain = RunDecode(*OpenBackend(*l.stage, c), c.req, model->Seed());
    ASSERT_TRUE(plain.ok());
    for (uint32_t s : {0u, 3u, c.req.gen - 1}) {
      for (bool outside : {false, true}) {
        SCOPED_TRACE(c.name + " step " + std::to_string(s) + (outside ? " outside" : ""));
        std::vector<uint32_t> claimed = plain->generated;
        claimed[s] = outside ? 300 + s : (claimed[s] + 1) % 300;
        auto forced = TeacherForce(*OpenBackend(*l.stage, c), c.req, claimed, 300, model->Seed());
        ASSERT_TRUE(forced.ok()) << forced.status().ToString();
        ASSERT_EQ(forced->generated.size(), s + 1);
        for (uint32_t i = 0; i <= s; ++i) {
          EXPECT_EQ(forced->generated[i], plain->generated[i]) << i;
          EXPECT_EQ(forced->logits_sha256[i], plain->logits_sha256[i]) << i;
        }
        if (c.trace) {
          EXPECT_EQ(forced->layer_digests.size(), s + 1);
        }
      }
    }
  }
}

TEST_F(TeacherForcing, RefusesClaimsOfTheWrongLength) {
  auto model = OpenModelDir(*dir_, ModelPins{});
  ASSERT_TRUE(model.ok());
  Loaded l = Load(*model, Variant{});
  const DecodeCase c = DecodeCases()[0];
  const std::vector<uint32_t> claimed(c.req.gen - 1, 1);
  auto forced = TeacherForce(*OpenBackend(*l.stage, c), c.req, claimed, 300, model->Seed());
  EXPECT_EQ(forced.status().kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep::testing
