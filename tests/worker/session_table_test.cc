// The session table on its own (worker/session_table.h), with hand-made
// caches and no model: opening, forking, evicting and releasing; the sticky
// failure; the relay state a first stage keeps; the step rules a TokenInput
// or HiddenFrame must pass and the KV budget counting held and batched
// entries. The same rules on two StageHosts: tests/runtime/relay_rules_test.cc.
#include "worker/session_table.h"

#include <gtest/gtest.h>

#include <bit>
#include <optional>

namespace lockstep {
namespace {

constexpr uint64_t kEntryBytes = 100;

// A cache of the layers [0, 2) with one kv head of width 2.
KvCache SmallCache() { return KvCache(0, 2, 2, 1, {1.0f}); }

wire::SessionOpen Open(uint64_t id) {
  wire::SessionOpen m;
  m.session_id = id;
  return m;
}

wire::TokenInput Tokens(uint64_t id, uint32_t step, uint32_t first_position, size_t n,
                        bool relayed = false, std::optional<uint32_t> relay = std::nullopt) {
  wire::TokenInput t;
  t.session_id = id;
  t.step = step;
  t.first_position = first_position;
  t.token_ids.assign(n, 1);
  t.relayed = relayed;
  if (relay) t.handoff = wire::ChainHandoff{step, {}, *relay};
  return t;
}

wire::HiddenFrame Hidden(uint64_t id, uint32_t first_position) {
  wire::HiddenFrame f;
  f.session_id = id;
  f.first_position = first_position;
  f.seq = 1;
  f.hidden = 4;
  f.resume_layer = 1;
  f.payload.assign(4, 0.0f);
  return f;
}

class SessionTableTest : public ::testing::Test {
 protected:
  void SetUp() override { Configure(/*is_first=*/true); }

  void Configure(bool is_first) {
    table_.Configure(SessionTable::Stage{kEntryBytes, /*max_positions=*/16, /*num_layers=*/2,
                                         is_first, /*layer_lo=*/is_first ? 0u : 1u,
                                         /*hidden=*/4, "worker w stage 0 layers [0,1)"});
  }
  // Opens `id` holding `entries` cache entries.
  void OpenWith(uint64_t id, size_t entries) {
    ASSERT_TRUE(table_.Open(Open(id), SmallCache()).ok());
    Result<StageSession*> s = table_.Find(id);
    ASSERT_TRUE(s.ok());
    if (entries > 0) (*s)->cache.Append(entries, 0);
  }
  StageSession& Get(uint64_t id) { return **table_.Find(id); }

  SessionTable table_;
};

TEST_F(SessionTableTest, ASessionOpensOnceAndAnUnknownOneIsNamed) {
  ASSERT_TRUE(table_.Open(Open(3), SmallCache()).ok());
  const Result<uint64_t> again = table_.Open(Open(3), SmallCache());
  EXPECT_EQ(again.status().kind(), ErrorKind::kInvalid);
  EXPECT_EQ(again.status().message(), "session 3 is already open");
  EXPECT_EQ(table_.size(), 1u);
  EXPECT_EQ(table_.Find(9).status().message(), "unknown session 9");
  EXPECT_EQ(table_.Evict(wire::Evict{9, 0, 1}).message(), "unknown session 9");
  EXPECT_EQ(table_.AdmitTokens(Tokens(9, 0, 0, 1)).status().message(), "unknown session 9");
  table_.Release(3);
  table_.Release(3);  // an unknown one changes nothing
  EXPECT_EQ(table_.size(), 0u);
  EXPECT_TRUE(table_.Open(Open(3), SmallCache()).ok()) << "released: the id is free again";
}

TEST_F(SessionTableTest, OpenRefusesBadSamplingAndWindowsAndLeavesNoSession) {
  wire::SessionOpen bad_sampling = Open(3);
  bad_sampling.sampling.temperature_bits = std::bit_cast<uint32_t>(-1.0f);
  const Status sampling = table_.Open(bad_sampling, SmallCache()).status();
  EXPECT_EQ(sampling.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(sampling.message().rfind("session sampling", 0), 0u) << sampling.message();
  wire::SessionOpen short_list = Open(3);
  short_list.window.kind = wire::WindowSpec::Kind::kPerLayer;
  short_list.window.per_layer = {4};
  EXPECT_EQ(table_.Open(short_list, SmallCache()).status().message(),
            "window list has 1 entries for a model of 2 layers");
  wire::SessionOpen huge = Open(3);
  huge.window.kind = wire::WindowSpec::Kind::kGlobal;
  huge.window.global = 0x80000000u;
  EXPECT_EQ(table_.Open(huge, SmallCache()).status().message(), "window too large");
  EXPECT_EQ(table_.size(), 0u);
  wire::SessionOpen windowed = Open(3);
  windowed.window.kind = wire::WindowSpec::Kind::kPerLayer;
  windowed.window.per_layer = {4, 5};
  ASSERT_TRUE(table_.Open(windowed, SmallCache()).ok());
  EXPECT_EQ(Get(3).cache.window(0), 4);
  EXPECT_EQ(Get(3).cache.window(1), 5);
}

TEST_F(SessionTableTest, TheReserveHintStaysWithinThePositionsAndTheBudget) {
  wire::SessionOpen m = Open(3);
  m.reserve_positions = 100;
  EXPECT_EQ(*table_.Open(m, SmallCache()), 16u) << "clamped to the model's positions";
  table_.set_kv_budget(10 * kEntryBytes);
  m.session_id = 4;
  EXPECT_EQ(*table_.Open(m, SmallCache()), 0u) << "16 entries would pass the budget: none";
  m.session_id = 5;
  m.reserve_positions = 10;
  EXPECT_EQ(*table_.Open(m, SmallCache()), 10u);
}

TEST_F(SessionTableTest, AFailureSticksWithItsFirstError) {
  OpenWith(3, 0);
  table_.Fail(3, CorruptError("frame digest"));
  table_.Fail(3, InvalidError("later"));
  table_.Fail(8, InvalidError("unknown: nothing"));
  const Status st = table_.Find(3).status();
  EXPECT_EQ(st.kind(), ErrorKind::kCorrupt);
  EXPECT_EQ(st.message(), "session 3 failed earlier: frame digest");
  EXPECT_EQ(table_.AdmitTokens(Tokens(3, 0, 0, 1)).status().message(), st.message());
}

TEST_F(SessionTableTest, AForkCopiesAKnownSessionIntoANewId) {
  OpenWith(3, 2);
  Get(3).trace = true;
  EXPECT_EQ(table_.Fork(wire::Fork{4, 5, 0}).status().message(), "unknown session 5");
  EXPECT_EQ(table_.Fork(wire::Fork{3, 3, 0}).status().message(), "fork: session 3 already exists");
  ASSERT_TRUE(table_.Fork(wire::Fork{4, 3, 0}).ok());
  EXPECT_TRUE(Get(4).cache.BitEqual(Get(3).cache));
  EXPECT_TRUE(Get(4).trace);
  EXPECT_EQ(table_.entries(), 4u);
  // A fork's reserve hint, as SessionOpen's: within the model's 16 positions.
  EXPECT_EQ(*table_.Fork(wire::Fork{6, 3, 10}), 10u);
  EXPECT_EQ(*table_.Fork(wire::Fork{7, 3, 100}), 16u);
  EXPECT_EQ(*table_.Fork(wire::Fork{8, 3, 0}), 0u);
  EXPECT_TRUE(Get(7).cache.BitEqual(Get(3).cache)) << "room reserved, nothing else changed";
  table_.Fail(3, InvalidError("gone"));
  EXPECT_EQ(table_.Fork(wire::Fork{9, 3, 0}).status().message(), "session 3 failed earlier: gone");
}

TEST_F(SessionTableTest, TheKvBudgetCountsHeldAndBatchedEntries) {
  table_.set_kv_budget(10 * kEntryBytes);
  OpenWith(3, 6);
  EXPECT_TRUE(table_.AdmitTokens(Tokens(3, 1, 6, 4)).ok()) << "exactly the budget";
  const Status step = table_.AdmitTokens(Tokens(3, 1, 6, 5)).status();
  EXPECT_EQ(step.kind(), ErrorKind::kOverloaded);
  EXPECT_NE(step.message().find("kv_bytes_per_worker"), std::string::npos) << step.message();
  EXPECT_NE(step.message().find("session 3 step 1 (KV bytes of all sessions on worker w stage 0 "
                                "layers [0,1))"),
            std::string::npos)
      << step.message();
  const Status fork = table_.Fork(wire::Fork{4, 3, 0}).status();
  EXPECT_EQ(fork.kind(), ErrorKind::kOverloaded);
  EXPECT_NE(fork.message().find("fork of session 3 into 4"), std::string::npos) << fork.message();
  EXPECT_EQ(table_.size(), 1u);
  table_.HoldForBatch(4);
  EXPECT_EQ(table_.AdmitTokens(Tokens(3, 1, 6, 1)).status().kind(), ErrorKind::kOverloaded)
      << "the batch's rows count before they are in a cache";
  table_.EndBatch();
  EXPECT_TRUE(table_.AdmitTokens(Tokens(3, 1, 6, 1)).ok());
}

TEST_F(SessionTableTest, AStepFollowsTheCacheAndFitsTheModel) {
  OpenWith(3, 2);
  EXPECT_EQ(table_.AdmitTokens(Tokens(3, 1, 3, 1)).status().message(),
            "first_position 3 does not follow this stage's cache of 2 entries");
  EXPECT_EQ(table_.AdmitTokens(Tokens(3, 1, 2, 15)).status().kind(), ErrorKind::kInvalid)
      << "17 positions of 16";
  EXPECT_TRUE(table_.AdmitTokens(Tokens(3, 1, 2, 14)).ok());
  EXPECT_EQ(table_.AdmitTokens(Tokens(3, 1, 2, 0)).status().message(),
            "token input without tokens");
}

TEST_F(SessionTableTest, ARelayHoldsTheSessionUntilItsLastStep) {
  OpenWith(3, 4);
  wire::TokenInput ask = Tokens(3, 1, 4, 1, false, 2);
  Result<StageSession*> s = table_.AdmitTokens(ask);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  SessionTable::NoteRelay(**s, ask);
  EXPECT_EQ((*s)->relay.left, 2u);
  EXPECT_EQ((*s)->relay.next_step, 2u);
  (*s)->cache.Append(1, 4);
  // The coordinator may not step, evict or fork the session meanwhile.
  EXPECT_EQ(table_.AdmitTokens(Tokens(3, 2, 5, 1)).status().message(),
            "session 3 step 2: a step from the coordinator while 2 relayed step(s) of the "
            "session are still to come");
  EXPECT_EQ(table_.Evict(wire::Evict{3, 0, 1}).message(),
            "evict of session 3 while 2 relayed step(s) of it are still to come");
  EXPECT_EQ(table_.Fork(wire::Fork{4, 3, 0}).status().message(),
            "fork of session 3 while 2 relayed step(s) of it are still to come");
  for (uint32_t step = 2, left = 1; step <= 3; ++step, --left) {
    wire::TokenInput relayed = Tokens(3, step, 3 + step, 1, true, left);
    Result<StageSession*> r = table_.AdmitTokens(relayed);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    SessionTable::NoteRelay(**r, relayed);
    (*r)->cache.Append(1, 3 + step);
  }
  EXPECT_EQ(Get(3).relay.left, 0u) << "the last relayed step ends the relay";
  EXPECT_TRUE(table_.Evict(wire::Evict{3, 0, 1}).ok());
}

TEST_F(SessionTableTest, RelayedStepsOfSessionsGoneOrFailedAreStale) {
  OpenWith(3, 0);
  OpenWith(4, 0);
  table_.Fail(4, InvalidError("x"));
  EXPECT_FALSE(table_.IsStaleRelay(Tokens(3, 1, 0, 1, true, 0)));
  EXPECT_TRUE(table_.IsStaleRelay(Tokens(4, 1, 0, 1, true, 0))) << "failed";
  EXPECT_TRUE(table_.IsStaleRelay(Tokens(9, 1, 0, 1, true, 0))) << "released or never open";
  EXPECT_FALSE(table_.IsStaleRelay(Tokens(9, 1, 0, 1))) << "the coordinator's: refused, not dropped";
  EXPECT_FALSE(table_.IsStaleRelay(Hidden(9, 0)));
}

TEST_F(SessionTableTest, AHiddenFrameMustFitTheStage) {
  OpenWith(3, 0);
  EXPECT_EQ(table_.AdmitHidden(Hidden(3, 0)).status().message(),
            "hidden frame sent to the first stage");
  Configure(/*is_first=*/false);
  EXPECT_EQ(table_.AdmitTokens(Tokens(3, 0, 0, 1)).status().message(),
            "token input sent to a stage that is not first");
  EXPECT_TRUE(table_.AdmitHidden(Hidden(3, 0)).ok());
  wire::HiddenFrame wide = Hidden(3, 0);
  wide.hidden = 8;
  EXPECT_EQ(table_.AdmitHidden(wide).status().message(), "hidden frame width 8, model width 4");
  wire::HiddenFrame early = Hidden(3, 0);
  early.resume_layer = 0;
  EXPECT_EQ(table_.AdmitHidden(early).status().message(),
            "hidden frame resumes at layer 0 but this stage starts at layer 1");
  wire::HiddenFrame digests = Hidden(3, 0);
  digests.layer_digests.resize(1);
  EXPECT_EQ(table_.AdmitHidden(digests).status().message(),
            "hidden frame carries 1 layer digests, expected 0 (the session is not traced)");
  Get(3).trace = true;
  EXPECT_TRUE(table_.AdmitHidden(digests).ok()) << "traced: one per earlier layer";
  EXPECT_EQ(table_.AdmitHidden(Hidden(3, 0)).status().message(),
            "hidden frame carries 0 layer digests, expected 1 (one per earlier layer and step "
            "row: the session is traced)");
}

TEST(SessionOfMessage, NamesTheSessionAMessageIsAbout) {
  bool has = false;
  EXPECT_EQ(SessionOfMessage(wire::Fork{4, 3, 0}, &has), 4u) << "a fork: the new session";
  EXPECT_TRUE(has);
  EXPECT_EQ(SessionOfMessage(wire::Evict{5, 0, 1}, &has), 5u);
  EXPECT_EQ(SessionOfMessage(wire::Heartbeat{}, &has), 0u);
  EXPECT_FALSE(has);
  EXPECT_EQ(StepOfMessage(Tokens(3, 7, 0, 1)), 7u);
  EXPECT_EQ(StepOfMessage(wire::Evict{5, 0, 1}), 0u);
}

}  // namespace
}  // namespace lockstep
