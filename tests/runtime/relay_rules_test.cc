// The first stage's relay rules (worker/stage_host.h), on two StageHosts
// driven by hand: a relayed step is taken only as the one its session
// expects next; while a relay runs the coordinator may not step, evict or
// fork the session; relayed steps of a session released meanwhile vanish
// without a word; a relay past the model's positions is refused before any
// work. Every refusal names what is wrong.
#include <gtest/gtest.h>

#include <variant>

#include "engine/witness.h"
#include "tests/runtime/stage_host_fixture.h"

namespace lockstep::testing {
namespace {

class RelayRules : public TwoStages {
 protected:
  void SetUp() override {
    TwoStages::SetUp();
    if (HasFatalFailure() || IsSkipped()) return;
    Open(kSession, 32);
  }

  // The prompt's TokenInput asking for `relay` relayed steps after it.
  wire::TokenInput Prompt(uint32_t relay) const { return PromptInput({1, 2, 3, 4}, relay); }
  // Runs `m` through both stages; returns the relayed next step the last
  // stage sent (if any) and appends its StepResults to *results.
  std::optional<wire::TokenInput> Step(const wire::Message& m,
                                       std::vector<wire::StepResult>* results) {
    first_.Handle(m, &out_);
    std::vector<wire::Message> hidden = TakeAll(&out_, Outgoing::To::kNextStage, &pool_);
    EXPECT_TRUE(out_.empty()) << "the first stage answered the coordinator";
    out_.clear();
    if (hidden.size() != 1) return std::nullopt;
    last_.Handle(hidden[0], &out_);
    std::vector<wire::Message> relayed = TakeAll(&out_, Outgoing::To::kFirstStage, &pool_);
    for (wire::Message& r : TakeAll(&out_, Outgoing::To::kCoordinator, &pool_)) {
      if (auto* sr = std::get_if<wire::StepResult>(&r)) results->push_back(*sr);
    }
    if (relayed.empty()) return std::nullopt;
    return std::get<wire::TokenInput>(relayed[0]);
  }
  // Handles `m` on the first stage and returns the error it reports.
  std::string Refusal(const wire::Message& m) {
    first_.Handle(m, &out_);
    std::vector<wire::Message> got = TakeAll(&out_, Outgoing::To::kCoordinator, &pool_);
    const bool forwarded = !out_.empty();
    out_.clear();
    EXPECT_EQ(got.size(), 1u);
    auto* e = got.empty() ? nullptr : std::get_if<wire::ErrorReport>(&got[0]);
    EXPECT_NE(e, nullptr) << "expected an ErrorReport";
    if (e == nullptr) return "";
    // A refused step runs nowhere; a refused control message still travels
    // on, so the later stages stay in step.
    if (std::holds_alternative<wire::TokenInput>(m)) {
      EXPECT_FALSE(forwarded);
    }
    return e->message;
  }

  std::vector<wire::StepResult> results_;
};

TEST_F(RelayRules, ARelayRunsItsStepsAndEndsWithTheLast) {
  std::optional<wire::TokenInput> next = Step(Prompt(3), &results_);
  for (uint32_t step = 1; next; ++step) {
    EXPECT_EQ(next->step, step);
    EXPECT_EQ(next->first_position, 4 + step - 1);
    EXPECT_EQ(next->handoff->relay, 3 - step);
    next = Step(*next, &results_);
  }
  ASSERT_EQ(results_.size(), 4u);  // the prompt's step and three relayed ones
  // The relay is over: the coordinator steps the session again.
  wire::TokenInput more;
  more.session_id = kSession;
  more.step = 9;
  more.first_position = 7;  // the prompt's 4 positions and the 3 relayed steps
  more.token_ids = {results_.back().token};
  more.handoff = wire::ChainHandoff{4, results_.back().chain_state};
  EXPECT_FALSE(Step(more, &results_).has_value());
  EXPECT_EQ(results_.size(), 5u);
}

TEST_F(RelayRules, ARelayedStepOfASessionThatRelaysNothingFailsIt) {
  std::optional<wire::TokenInput> none = Step(Prompt(0), &results_);
  ASSERT_FALSE(none.has_value());
  ASSERT_EQ(results_.size(), 1u);
  wire::TokenInput forged;
  forged.session_id = kSession;
  forged.step = 1;
  forged.first_position = 4;
  forged.token_ids = {results_[0].token};
  forged.handoff = wire::ChainHandoff{1, results_[0].chain_state};
  forged.relayed = true;
  EXPECT_NE(Refusal(forged).find("has no relayed step to come"), std::string::npos);
  // The session is failed from now on, and says so.
  forged.relayed = false;
  EXPECT_NE(Refusal(forged).find("failed earlier"), std::string::npos);
}

TEST_F(RelayRules, ARelayedStepOutOfTurnIsRefusedNamingTheExpectedOne) {
  std::optional<wire::TokenInput> next = Step(Prompt(4), &results_);
  ASSERT_TRUE(next.has_value());
  wire::TokenInput skipped = *next;
  skipped.step += 1;
  const std::string why = Refusal(skipped);
  EXPECT_NE(why.find("expects step 1 with 3 to follow"), std::string::npos) << why;
}

TEST_F(RelayRules, TheCoordinatorCannotStepASessionThatRelays) {
  std::optional<wire::TokenInput> next = Step(Prompt(5), &results_);
  ASSERT_TRUE(next.has_value());
  wire::TokenInput own = *next;
  own.relayed = false;
  own.handoff->relay = 0;
  EXPECT_NE(Refusal(own).find("a step from the coordinator while 5 relayed step(s)"),
            std::string::npos);
}

TEST_F(RelayRules, EvictionsAndForksWaitForTheRelayToEnd) {
  std::optional<wire::TokenInput> next = Step(Prompt(2), &results_);
  ASSERT_TRUE(next.has_value());
  // The fork is refused (the new session is never made); the eviction
  // fails the session, whose cache other stages may have changed already.
  EXPECT_NE(Refusal(wire::Fork{8, kSession, 0}).find("fork of session 7 while 2 relayed"),
            std::string::npos);
  EXPECT_NE(Refusal(wire::Evict{kSession, 0, 1}).find("evict of session 7 while 2 relayed"),
            std::string::npos);
}

TEST_F(RelayRules, RelayedStepsOfAReleasedSessionVanishWithoutAWord) {
  std::optional<wire::TokenInput> next = Step(Prompt(6), &results_);
  ASSERT_TRUE(next.has_value());
  first_.Handle(wire::Release{kSession}, &out_);
  out_.clear();
  first_.Handle(*next, &out_);
  EXPECT_TRUE(out_.empty()) << "a relayed step of a released session was answered";
}

TEST_F(RelayRules, ARelayPastTheModelsPositionsIsRefusedBeforeAnyWork) {
  const std::string why = Refusal(Prompt(1u << 30));
  EXPECT_NE(why.find("limit max_positions"), std::string::npos) << why;
  EXPECT_NE(why.find("relayed after it"), std::string::npos) << why;
}

}  // namespace
}  // namespace lockstep::testing
