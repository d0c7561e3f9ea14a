// The step rules on their own (worker/step_rules.h): positions, relays and
// the KV budget, each refusal with its wording (positions: base/limits.h's). RelayRules (two StageHosts
// by hand) and the KV budget cluster tests show them applied on workers.
#include "worker/step_rules.h"

#include <gtest/gtest.h>

#include <optional>

namespace lockstep::step_rules {
namespace {

wire::TokenInput Step(uint32_t step, uint32_t first_position, size_t tokens, bool relayed,
                      std::optional<uint32_t> relay = std::nullopt) {
  wire::TokenInput t;
  t.session_id = 3;
  t.step = step;
  t.first_position = first_position;
  t.token_ids.assign(tokens, 1);
  t.relayed = relayed;
  if (relay) t.handoff = wire::ChainHandoff{0, {}, *relay};
  return t;
}

TEST(StepRules, PositionsFollowTheCacheAndFitTheModel) {
  EXPECT_TRUE(CheckPosition(4, 4, 3, 8).ok());
  EXPECT_TRUE(CheckPosition(4, 4, 4, 8).ok()) << "up to the bound itself";
  EXPECT_TRUE(CheckPosition(4, 4, 100, 0).ok()) << "0: no bound";
  const Status gap = CheckPosition(4, 5, 1, 8);
  EXPECT_EQ(gap.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(gap.message(), "first_position 5 does not follow this stage's cache of 4 entries");
  const Status over = CheckPosition(4, 4, 5, 8);
  EXPECT_EQ(over.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(over.message(),
            "limit max_positions: a step of 5 token(s) at position 4 asks for 9, over the limit "
            "of 8 positions (the model's max_position_embeddings, or a lower max_positions)");
}

TEST(StepRules, ARelayedStepIsExactlyTheOneItsSessionExpects) {
  const RelayState relaying{3, 7};  // step 7 next, with 2 to follow it
  EXPECT_TRUE(CheckRelay(relaying, Step(7, 10, 1, true, 2), 0).ok());
  EXPECT_EQ(CheckRelay(relaying, Step(8, 10, 1, true, 1), 0).message(),
            "session 3 step 8 relayed with 1 to follow, but the session expects step 7 with 2 "
            "to follow");
  EXPECT_EQ(CheckRelay(relaying, Step(7, 10, 1, true, 1), 0).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(CheckRelay(relaying, Step(7, 10, 2, true, 2), 0).message(),
            "session 3 step 7: a relayed step feeds one token, not 2");
  EXPECT_EQ(CheckRelay(RelayState{}, Step(7, 10, 1, true, 0), 0).message(),
            "session 3 step 7: relayed by the last stage, but the session has no relayed step "
            "to come");
}

TEST(StepRules, TheCoordinatorWaitsForARelayToEnd) {
  const RelayState relaying{2, 5};
  EXPECT_EQ(CheckRelay(relaying, Step(5, 4, 1, false), 0).message(),
            "session 3 step 5: a step from the coordinator while 2 relayed step(s) of the "
            "session are still to come");
  EXPECT_TRUE(CheckRelay(RelayState{}, Step(5, 4, 1, false), 0).ok());
  EXPECT_EQ(CheckNotRelaying(3, relaying, "evict").message(),
            "evict of session 3 while 2 relayed step(s) of it are still to come");
  EXPECT_TRUE(CheckNotRelaying(3, RelayState{}, "fork").ok());
}

TEST(StepRules, ARelayMayNotRunPastTheModelsPositions) {
  // A 4-token prompt at 0 plus 4 relayed steps reaches position 8.
  EXPECT_TRUE(CheckRelay(RelayState{}, Step(0, 0, 4, false, 4), 8).ok());
  const Status st = CheckRelay(RelayState{}, Step(0, 0, 4, false, 5), 8);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(st.message(),
            "limit max_positions: session 3 step 0 with 5 relayed after it asks for 9, over the "
            "limit of 8 positions (the model's max_position_embeddings, or a lower max_positions)");
  EXPECT_TRUE(CheckRelay(RelayState{}, Step(0, 0, 4, false, 5), 0).ok()) << "0: no bound";
}

TEST(StepRules, TheKvBudgetCountsWhatIsHeldAndRefusesNamingTheLimit) {
  int built = 0;
  const auto what = [&] {
    ++built;
    return std::string("session 3 step 1");
  };
  EXPECT_TRUE(CheckKvBudget(100, 6, 4, 1000, what).ok()) << "exactly the budget";
  EXPECT_TRUE(CheckKvBudget(0, 6, 4, 0, what).ok()) << "nothing assigned: nothing to check";
  EXPECT_EQ(built, 0) << "the name is built only for a refusal";
  const Status st = CheckKvBudget(100, 6, 5, 1000, what);
  EXPECT_EQ(st.kind(), ErrorKind::kOverloaded);
  EXPECT_NE(st.message().find("kv_bytes_per_worker"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("session 3 step 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("1100"), std::string::npos) << st.message();
  EXPECT_EQ(built, 1);
  EXPECT_EQ(CheckKvBudget(UINT64_MAX / 2, 1, 2, 1000, what).kind(), ErrorKind::kOverloaded)
      << "no overflow";
}

}  // namespace
}  // namespace lockstep::step_rules
