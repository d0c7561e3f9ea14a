// The step emitter on its own (worker/step_emitter.h), with hand-made rows
// and logits and no model: what a stage sends for a computed step, every
// frame parsed back as its receiver would. The token, logits digest and
// chain state a StepResult carries are compared with ChooseAndWitness run
// directly on the same logits and chain.
#include "worker/step_emitter.h"

#include <gtest/gtest.h>

#include <bit>
#include <vector>

#include "engine/witness.h"

namespace lockstep {
namespace {

constexpr size_t kHidden = 4;
constexpr size_t kVocab = 8;

std::vector<uint32_t> Bits(std::span<const float> v) {
  std::vector<uint32_t> bits;
  for (float f : v) bits.push_back(std::bit_cast<uint32_t>(f));
  return bits;
}

// Logits whose greedy choice is `top`.
std::vector<float> LogitsWithTop(uint32_t top) {
  std::vector<float> logits(kVocab);
  for (size_t i = 0; i < kVocab; ++i) logits[i] = 0.25f * static_cast<float>(i % 3);
  logits[top] = 9.5f;
  return logits;
}

wire::ChainHandoff Handoff(uint32_t decode_step, uint32_t relay) {
  const std::vector<uint32_t> prompt = {1, 2, 3};
  return wire::ChainHandoff{decode_step, WitnessChain(WitnessSeed{}, prompt).Export(), relay};
}

wire::Message Parse(const Outgoing& o) {
  Result<wire::Message> m = wire::ParseMessage(o.frame);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? *m : wire::Message(wire::Heartbeat{});
}

class StepEmitterTest : public ::testing::Test {
 protected:
  void SetUp() override { emitter_.Configure(/*stage_index=*/1, /*layer_hi=*/2, kHidden, nullptr); }

  StepInput Input(StageSession* s, uint64_t id, const std::optional<wire::ChainHandoff>* handoff,
                  uint32_t relay = 0) {
    return StepInput{s, id, /*step=*/5, /*first_pos=*/3, /*n=*/1, handoff, false, relay, 0};
  }
  // What ChooseAndWitness itself gives for `logits` after `h`.
  static std::pair<StepOutcome, Sha256State> Expected(std::span<const float> logits,
                                                      const wire::ChainHandoff& h) {
    Result<WitnessChain> chain = WitnessChain::Resume(h.chain_state);
    EXPECT_TRUE(chain.ok());
    SamplingScratch scratch;
    const StepOutcome o = ChooseAndWitness(logits, SamplingParams{}, h.decode_step, &*chain,
                                           &scratch);
    return {o, chain->Export()};
  }

  StageSession session_{KvCache(0, 1, 2, 1, {1.0f}), SamplingParams{}};
  StepEmitter emitter_;
  std::vector<Outgoing> out_;
};

TEST_F(StepEmitterTest, AStageBeforeTheLastSendsItsRowsOnAsAHiddenFrame) {
  const std::optional<wire::ChainHandoff> handoff = Handoff(4, 0);
  const std::vector<float> rows = {1.5f, -0.0f, 3.25f, 1e-30f, 7.0f, 8.0f, -9.0f, 0.5f};
  const std::vector<Digest> digests = {Digest{1}, Digest{2}};
  StepInput in = Input(&session_, 11, &handoff);
  in.n = 2;
  emitter_.EmitHidden(in, rows, digests, &out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].to, Outgoing::To::kNextStage);
  EXPECT_TRUE(out_[0].has_session);
  EXPECT_EQ(out_[0].session_id, 11u);
  EXPECT_EQ(out_[0].step, 5u);
  const auto f = std::get<wire::HiddenFrame>(Parse(out_[0]));
  EXPECT_EQ(f.session_id, 11u);
  EXPECT_EQ(f.step, 5u);
  EXPECT_EQ(f.first_position, 3u);
  EXPECT_EQ(f.seq, 2u);
  EXPECT_EQ(f.hidden, kHidden);
  EXPECT_EQ(f.resume_layer, 2u) << "the next stage resumes after this one's layers";
  EXPECT_EQ(Bits(f.payload), Bits(rows));
  ASSERT_TRUE(f.handoff.has_value());
  EXPECT_EQ(f.handoff->chain_state, handoff->chain_state);
  EXPECT_TRUE(f.layer_digests.empty()) << "the session is not traced";
  out_.clear();
  session_.trace = true;
  emitter_.EmitHidden(in, rows, digests, &out_);
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(std::get<wire::HiddenFrame>(Parse(out_[0])).layer_digests, digests);
}

TEST_F(StepEmitterTest, TheLastStageAnswersAHandoffWithItsStepResult) {
  const std::optional<wire::ChainHandoff> handoff = Handoff(4, 0);
  const std::vector<float> logits = LogitsWithTop(6);
  ASSERT_TRUE(emitter_.EmitOutcome(Input(&session_, 11, &handoff), logits, {}, &out_).ok());
  ASSERT_EQ(out_.size(), 1u) << "no relay: the StepResult alone";
  EXPECT_EQ(out_[0].to, Outgoing::To::kCoordinator);
  const auto r = std::get<wire::StepResult>(Parse(out_[0]));
  const auto [expected, chain] = Expected(logits, *handoff);
  EXPECT_EQ(r.session_id, 11u);
  EXPECT_EQ(r.step, 5u);
  EXPECT_EQ(r.token, 6u);
  EXPECT_EQ(r.token, expected.token);
  EXPECT_EQ(r.logits_sha256, expected.logits_sha256);
  EXPECT_EQ(r.chain_state, chain);
  EXPECT_TRUE(r.layer_digests.empty());
}

TEST_F(StepEmitterTest, ARelayingStepSendsTheNextStepToTheFirstStageFirst) {
  const std::optional<wire::ChainHandoff> handoff = Handoff(4, 3);
  const std::vector<float> logits = LogitsWithTop(2);
  ASSERT_TRUE(emitter_.EmitOutcome(Input(&session_, 11, &handoff, 3), logits, {}, &out_).ok());
  ASSERT_EQ(out_.size(), 2u);
  ASSERT_EQ(out_[0].to, Outgoing::To::kFirstStage) << "the awaited next step goes first";
  EXPECT_EQ(out_[0].step, 6u);
  EXPECT_EQ(out_[1].to, Outgoing::To::kCoordinator);
  const auto next = std::get<wire::TokenInput>(Parse(out_[0]));
  const auto r = std::get<wire::StepResult>(Parse(out_[1]));
  EXPECT_TRUE(next.relayed);
  EXPECT_EQ(next.session_id, 11u);
  EXPECT_EQ(next.step, 6u);
  EXPECT_EQ(next.first_position, 4u) << "after the step's one position at 3";
  EXPECT_EQ(next.token_ids, std::vector<uint32_t>{2});
  EXPECT_EQ(r.token, 2u);
  ASSERT_TRUE(next.handoff.has_value());
  EXPECT_EQ(next.handoff->decode_step, 5u);
  EXPECT_EQ(next.handoff->relay, 2u) << "one fewer to follow";
  EXPECT_EQ(next.handoff->chain_state, r.chain_state) << "the chain after this step";
}

TEST_F(StepEmitterTest, WithoutAHandoffTheLogitsGoBackAndNoOutputSendsNothing) {
  const std::optional<wire::ChainHandoff> none;
  const std::vector<float> logits = LogitsWithTop(1);
  session_.trace = true;
  const std::vector<Digest> digests = {Digest{7}};
  ASSERT_TRUE(emitter_.EmitOutcome(Input(&session_, 11, &none), logits, digests, &out_).ok());
  ASSERT_EQ(out_.size(), 1u);
  const auto l = std::get<wire::Logits>(Parse(out_[0]));
  EXPECT_EQ(l.vocab, kVocab);
  EXPECT_EQ(Bits(l.payload), Bits(logits));
  EXPECT_EQ(l.layer_digests, digests);
  out_.clear();
  StepInput quiet = Input(&session_, 11, &none);
  quiet.no_output = true;
  ASSERT_TRUE(emitter_.EmitOutcome(quiet, logits, digests, &out_).ok());
  EXPECT_TRUE(out_.empty());
}

TEST_F(StepEmitterTest, AChainThatDoesNotResumeIsAnErrorAndSendsNothing) {
  std::optional<wire::ChainHandoff> bad = Handoff(4, 1);
  bad->chain_state.bytes.fill(0xff);
  const Status st = emitter_.EmitOutcome(Input(&session_, 11, &bad, 1), LogitsWithTop(1), {}, &out_);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(out_.empty());
}

TEST_F(StepEmitterTest, ABatchSendsEveryRelayBeforeAnyResultAndFailsABadRowInPlace) {
  StageSession other{KvCache(0, 1, 2, 1, {1.0f}), SamplingParams{}};
  StageSession third{KvCache(0, 1, 2, 1, {1.0f}), SamplingParams{}};
  const std::optional<wire::ChainHandoff> relay = Handoff(4, 1);
  std::optional<wire::ChainHandoff> bad = Handoff(4, 0);
  bad->chain_state.bytes.fill(0xff);
  const std::vector<StepInput> rows = {Input(&session_, 11, &relay, 1),
                                       Input(&third, 13, &bad), Input(&other, 12, &relay, 1)};
  std::vector<float> logits = LogitsWithTop(3);
  const std::vector<float> second = LogitsWithTop(0), third_row = LogitsWithTop(5);
  logits.insert(logits.end(), second.begin(), second.end());
  logits.insert(logits.end(), third_row.begin(), third_row.end());
  std::vector<uint64_t> failed;
  emitter_.EmitOutcomes(
      rows, logits,
      [&](const StepInput& in, const Status& st) {
        EXPECT_FALSE(st.ok());
        failed.push_back(in.session_id);
        out_.push_back(Outgoing{});  // marks where the failure came in the order
      },
      &out_);
  EXPECT_EQ(failed, std::vector<uint64_t>{13});
  ASSERT_EQ(out_.size(), 5u);
  EXPECT_EQ(out_[0].to, Outgoing::To::kFirstStage);
  EXPECT_EQ(out_[0].session_id, 11u);
  EXPECT_EQ(out_[1].to, Outgoing::To::kFirstStage);
  EXPECT_EQ(out_[1].session_id, 12u);
  EXPECT_EQ(out_[2].session_id, 11u);
  EXPECT_TRUE(out_[3].frame.empty()) << "the bad row fails in its place";
  EXPECT_EQ(out_[4].session_id, 12u);
  const auto r11 = std::get<wire::StepResult>(Parse(out_[2]));
  const auto r12 = std::get<wire::StepResult>(Parse(out_[4]));
  const auto [e11, c11] = Expected(std::span<const float>(logits).subspan(0, kVocab), *relay);
  const auto [e12, c12] = Expected(std::span<const float>(logits).subspan(2 * kVocab), *relay);
  EXPECT_EQ(r11.token, 3u);
  EXPECT_EQ(r12.token, 5u);
  EXPECT_EQ(r11.logits_sha256, e11.logits_sha256);
  EXPECT_EQ(r12.logits_sha256, e12.logits_sha256);
  EXPECT_EQ(r11.chain_state, c11);
  EXPECT_EQ(r12.chain_state, c12);
  EXPECT_EQ(std::get<wire::TokenInput>(Parse(out_[1])).token_ids, std::vector<uint32_t>{5});
}

TEST_F(StepEmitterTest, FramesComeFromThePoolWhenOneIsSet) {
  wire::FramePool pool;
  wire::Frame given(4096);
  const uint8_t* storage = given.data();
  given.clear();
  pool.Give(std::move(given));
  emitter_.set_frame_pool(&pool);
  const std::optional<wire::ChainHandoff> handoff = Handoff(4, 0);
  ASSERT_TRUE(emitter_.EmitOutcome(Input(&session_, 11, &handoff), LogitsWithTop(1), {}, &out_).ok());
  ASSERT_EQ(out_.size(), 1u);
  EXPECT_EQ(out_[0].frame.data(), storage) << "marshalled into the pooled frame";
}

}  // namespace
}  // namespace lockstep
