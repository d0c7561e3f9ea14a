// Multi-row steps (TokenInput.stepRows, worker/row_step_host.h) on two
// StageHosts driven by hand: every step row's outcome (token, logits
// sha256, chain state after it) and, traced, its layer digests equal those
// of the same tokens fed as single steps; the rows a coordinator drops with
// an Evict leave both stages as if they had never been fed; and what a
// hostile peer could send in a multi-row step is refused by name, before
// any work, on the wire and on the stage.
#include <gtest/gtest.h>

#include <variant>

#include "engine/witness.h"
#include "tests/runtime/stage_host_fixture.h"

namespace lockstep::testing {
namespace {

class RowStepRules : public TwoStages {
 protected:
  void OpenSession(uint64_t id, bool trace) { Open(id, 0, trace); }
  wire::TokenInput Input(uint64_t id, uint32_t pos, std::vector<uint32_t> ids, uint32_t decode_step,
                         const Sha256State& chain, uint16_t step_rows) const {
    wire::TokenInput in;
    in.phase = ids.size() > 1 ? wire::TokenInput::Phase::kPrefill : wire::TokenInput::Phase::kDecode;
    in.session_id = id;
    in.first_position = pos;
    in.token_ids = std::move(ids);
    in.handoff = wire::ChainHandoff{decode_step, chain, 0};
    in.step_rows = step_rows;
    return in;
  }
  // Runs `m` through both stages: the last stage's StepResult.
  wire::StepResult Run(const wire::Message& m) {
    first_.Handle(m, &out_);
    std::vector<wire::Message> hidden = TakeAll(&out_, Outgoing::To::kNextStage, &pool_);
    EXPECT_EQ(hidden.size(), 1u);
    ExpectNoError();
    if (hidden.size() != 1) return {};
    last_.Handle(hidden[0], &out_);
    std::vector<wire::Message> got = TakeAll(&out_, Outgoing::To::kCoordinator, &pool_);
    out_.clear();
    EXPECT_EQ(got.size(), 1u);
    if (got.size() != 1) return {};
    if (auto* e = std::get_if<wire::ErrorReport>(&got[0])) ADD_FAILURE() << e->message;
    auto* r = std::get_if<wire::StepResult>(&got[0]);
    return r != nullptr ? *r : wire::StepResult{};
  }
  void ExpectNoError() {
    for (const wire::Message& m : TakeAll(&out_, Outgoing::To::kCoordinator, &pool_)) {
      if (auto* e = std::get_if<wire::ErrorReport>(&m)) ADD_FAILURE() << e->message;
    }
  }
  // The ErrorReport `host` answers `m` with; nothing may go on.
  std::string Refusal(StageHost& host, const wire::Message& m) {
    host.Handle(m, &out_);
    std::vector<wire::Message> got = TakeAll(&out_, Outgoing::To::kCoordinator, &pool_);
    EXPECT_TRUE(out_.empty()) << "a refused step went on";
    out_.clear();
    EXPECT_EQ(got.size(), 1u);
    auto* e = got.empty() ? nullptr : std::get_if<wire::ErrorReport>(&got[0]);
    EXPECT_NE(e, nullptr) << "expected an ErrorReport";
    return e != nullptr ? e->message : "";
  }
  Sha256State Chain(const std::vector<uint32_t>& prompt) const {
    return WitnessChain(info_.Seed(), prompt).Export();
  }
};

TEST_F(RowStepRules, EveryStepRowEqualsTheSameTokenFedAsASingleStep) {
  const std::vector<uint32_t> prompt{1, 2, 3, 4}, proposed{9, 5, 6};
  for (const bool trace : {false, true}) {
    SCOPED_TRACE(trace ? "traced" : "untraced");
    const uint64_t rows_id = trace ? 20 : 10, single_id = rows_id + 1;
    OpenSession(rows_id, trace);
    OpenSession(single_id, trace);
    std::vector<uint32_t> all = prompt;
    all.insert(all.end(), proposed.begin(), proposed.end());
    const wire::StepResult together = Run(Input(rows_id, 0, all, 0, Chain(prompt), 4));
    ASSERT_EQ(together.later_rows.size(), 3u);

    std::vector<wire::StepResult> single{Run(Input(single_id, 0, prompt, 0, Chain(prompt), 0))};
    for (uint32_t i = 0; i < proposed.size(); ++i) {
      single.push_back(Run(Input(single_id, 4 + i, {proposed[i]}, i + 1, single.back().chain_state, 0)));
    }
    EXPECT_EQ(together.token, single[0].token);
    EXPECT_EQ(together.logits_sha256, single[0].logits_sha256);
    EXPECT_EQ(together.chain_state, single[0].chain_state);
    std::vector<Digest> digests = single[0].layer_digests;
    for (size_t i = 0; i < together.later_rows.size(); ++i) {
      const wire::RowOutcome want{single[i + 1].token, single[i + 1].logits_sha256,
                                  single[i + 1].chain_state};
      EXPECT_EQ(together.later_rows[i], want) << "row " << i + 1;
      digests.insert(digests.end(), single[i + 1].layer_digests.begin(),
                     single[i + 1].layer_digests.end());
    }
    EXPECT_EQ(together.layer_digests.size(), trace ? 4u * 2u : 0u);
    EXPECT_EQ(together.layer_digests, digests);
  }
}

TEST_F(RowStepRules, RowsDroppedByAnEvictLeaveBothStagesAsIfNeverFed) {
  const std::vector<uint32_t> prompt{1, 2, 3, 4};
  OpenSession(10, false);
  OpenSession(11, false);
  Run(Input(10, 0, {1, 2, 3, 4, 9, 5, 6}, 0, Chain(prompt), 4));
  first_.Handle(wire::Evict{10, 5, 2}, &out_);  // rows 2 and 3 (positions 5, 6) rejected
  last_.Handle(Take(&out_, Outgoing::To::kNextStage, &pool_), &out_);
  ASSERT_TRUE(out_.empty());
  const wire::StepResult r0 = Run(Input(11, 0, prompt, 0, Chain(prompt), 0));
  const wire::StepResult r1 = Run(Input(11, 4, {9}, 1, r0.chain_state, 0));
  const wire::StepResult kept = Run(Input(10, 5, {8, 7}, 2, r1.chain_state, 2));
  const wire::StepResult plain = Run(Input(11, 5, {8, 7}, 2, r1.chain_state, 2));
  EXPECT_EQ(kept.token, plain.token);
  EXPECT_EQ(kept.logits_sha256, plain.logits_sha256);
  EXPECT_EQ(kept.later_rows, plain.later_rows);
}

TEST_F(RowStepRules, AHostileMultiRowStepIsRefusedByNameBeforeAnyWork) {
  const std::vector<uint32_t> prompt{1, 2, 3};
  OpenSession(10, false);
  EXPECT_NE(Refusal(first_, Input(10, 0, prompt, 0, Chain(prompt), 4))
                .find("a multi-row step of 4 step rows feeds only 3 rows"),
            std::string::npos);
  OpenSession(11, false);
  wire::TokenInput bare = Input(11, 0, prompt, 0, Chain(prompt), 2);
  bare.handoff.reset();
  EXPECT_NE(Refusal(first_, bare).find("without a chain handoff"), std::string::npos);
  OpenSession(12, false);
  wire::TokenInput relaying = Input(12, 0, prompt, 0, Chain(prompt), 2);
  relaying.handoff->relay = 3;
  EXPECT_NE(Refusal(first_, relaying).find("asks for relayed steps"), std::string::npos);
  OpenSession(13, false);
  wire::TokenInput stale = Input(13, 5, prompt, 0, Chain(prompt), 2);  // not where the cache ends
  EXPECT_NE(Refusal(first_, stale).find("does not follow this stage's cache"), std::string::npos);

  // The wire refuses the same shapes before any stage sees them.
  for (const wire::TokenInput& bad : {Input(14, 0, prompt, 0, Chain(prompt), 4), bare, relaying}) {
    Result<wire::Message> parsed = wire::ParseMessage(wire::MarshalMessage(bad));
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().kind(), ErrorKind::kCorrupt) << parsed.status().ToString();
  }
  wire::TokenInput relayed = Input(14, 0, {7}, 0, Chain(prompt), 1);
  relayed.relayed = true;
  Result<wire::Message> parsed = wire::ParseMessage(wire::MarshalMessage(relayed));
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("sent as a relayed step"), std::string::npos);
}

TEST_F(RowStepRules, AHiddenFrameWhoseTraceOrRowsDoNotFitItsStepIsRefused) {
  const std::vector<uint32_t> prompt{1, 2, 3, 4};
  OpenSession(20, true);
  first_.Handle(Input(20, 0, {1, 2, 3, 4, 9}, 0, Chain(prompt), 2), &out_);
  std::vector<wire::Message> hidden = TakeAll(&out_, Outgoing::To::kNextStage, &pool_);
  ASSERT_EQ(hidden.size(), 1u);
  auto frame = std::get<wire::HiddenFrame>(hidden[0]);
  EXPECT_EQ(frame.layer_digests.size(), 2u);  // layer 0 of each step row
  wire::HiddenFrame one_row_of_digests = frame;
  one_row_of_digests.layer_digests.resize(1);
  EXPECT_NE(Refusal(last_, one_row_of_digests).find("carries 1 layer digests, expected 2"),
            std::string::npos);

  OpenSession(21, false);
  first_.Handle(Input(21, 0, {1, 2, 3, 4, 9}, 0, Chain(prompt), 2), &out_);
  hidden = TakeAll(&out_, Outgoing::To::kNextStage, &pool_);
  ASSERT_EQ(hidden.size(), 1u);
  frame = std::get<wire::HiddenFrame>(hidden[0]);
  frame.step_rows = 6;  // more step rows than the frame's 5
  EXPECT_NE(Refusal(last_, frame).find("feeds only 5 rows"), std::string::npos);
  // The digest covers the step rows: a changed count no longer parses.
  wire::Frame bytes = wire::MarshalHidden(std::get<wire::HiddenFrame>(hidden[0]));
  const wire::HiddenFrame sent = std::get<wire::HiddenFrame>(hidden[0]);
  wire::HiddenFrame other = sent;
  other.step_rows = 3;
  EXPECT_NE(wire::HiddenFrameDigest(other), wire::HiddenFrameDigest(sent));
  EXPECT_TRUE(wire::ParseMessage(bytes).ok());
}

TEST(RowStepWire, AStepResultCarriesItsLaterRowsUnderItsDigest) {
  wire::StepResult r;
  r.session_id = 3;
  r.step = 4;
  r.token = 5;
  r.chain_state = WitnessChain(WitnessSeed{}, std::vector<uint32_t>{1}).Export();
  r.later_rows = {{6, Digest{1}, r.chain_state}, {7, Digest{2}, r.chain_state}};
  Result<wire::Message> parsed = wire::ParseMessage(wire::MarshalMessage(r));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(std::get<wire::StepResult>(*parsed).later_rows, r.later_rows);
  wire::StepResult changed = r;
  changed.later_rows[1].token = 8;
  EXPECT_NE(wire::StepResultDigest(changed), wire::StepResultDigest(r));
  changed = r;
  changed.later_rows.pop_back();
  EXPECT_NE(wire::StepResultDigest(changed), wire::StepResultDigest(r));
}

}  // namespace
}  // namespace lockstep::testing
