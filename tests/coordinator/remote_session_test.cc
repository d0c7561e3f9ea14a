// RemoteSession on a fake SessionLink (no worker, no socket): what it
// sends for feeds and evictions, how it rebuilds itself after a recovery
// (release, a fresh id, the history replayed in its chunks and at its
// positions, then the step retried), and what it refuses before sending
// anything. The Recovery and Sessions cluster tests show the same on real
// workers.
#include "coordinator/remote_session.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/row_step.h"
#include "engine/witness.h"
#include "tests/coordinator/fake_link.h"

namespace lockstep {
namespace {

class RemoteSessionTest : public ::testing::Test {
 protected:
  std::unique_ptr<RemoteSession> Open() {
    wire::SessionOpen open;
    open.session_id = link_.NewSessionId();
    link_.Post(open.session_id, wire::MarshalMessage(open), false);
    return std::make_unique<RemoteSession>(link_, open, SamplingParams{}, link_.epoch());
  }
  Status Feed(RemoteSession& s, std::vector<uint32_t> tokens) {
    std::vector<float> logits;
    return s.Feed(tokens, &logits);
  }
  FakeLink link_;
};

TEST_F(RemoteSessionTest, FeedsAndEvictionsGoOutInOrderAtTheirPositions) {
  auto s = Open();
  ASSERT_TRUE(Feed(*s, {1, 2, 3}).ok());
  ASSERT_TRUE(s->Evict(0, 1).ok());
  ASSERT_TRUE(s->FeedWithoutOutput(std::vector<uint32_t>{4}).ok());
  ASSERT_TRUE(Feed(*s, {5}).ok());
  EXPECT_EQ(s->CacheLength(), 4u);
  const std::vector<std::string> expected{"open 100", "feed 100@0:1,2,3,", "evict 100 0+1",
                                          "feed 100@2:4, no_output", "feed 100@3:5,"};
  EXPECT_EQ(link_.log, expected);
}

TEST_F(RemoteSessionTest, AfterARecoveryTheSessionReplaysItsHistoryUnderAFreshId) {
  auto s = Open();
  ASSERT_TRUE(Feed(*s, {1, 2, 3}).ok());
  ASSERT_TRUE(s->Evict(1, 1).ok());
  ASSERT_TRUE(Feed(*s, {4}).ok());
  link_.log.clear();
  link_.epoch_now = 1;  // a stage was rebuilt on a spare
  ASSERT_TRUE(Feed(*s, {5}).ok());
  const std::vector<std::string> expected{"release 100",       "open 101",      "feed 101@0:1,2,3,",
                                          "evict 101 1+1",     "feed 101@2:4,", "feed 101@3:5,"};
  EXPECT_EQ(link_.log, expected);
  EXPECT_EQ(s->id(), 101u);
}

TEST_F(RemoteSessionTest, AStepThatFailsBecauseARecoveryStartedIsRetriedOnceRebuilt) {
  auto s = Open();
  ASSERT_TRUE(Feed(*s, {1, 2}).ok());
  bool failed_once = false;
  const auto normal = link_.answer;
  link_.answer = [&](const wire::TokenInput& in) -> SessionLink::ReplyResult {
    if (failed_once) return normal(in);
    failed_once = true;
    link_.epoch_now = 1;  // the epoch moves before the step fails
    return DisconnectedError("stage 1 died; rebuilding its stage on a spare");
  };
  link_.log.clear();
  ASSERT_TRUE(Feed(*s, {3}).ok());
  const std::vector<std::string> expected{"feed 100@2:3,", "release 100", "open 101",
                                          "feed 101@0:1,2,", "feed 101@2:3,"};
  EXPECT_EQ(link_.log, expected);
}

TEST_F(RemoteSessionTest, AFailureWithoutARecoveryIsTheStepsError) {
  auto s = Open();
  link_.answer = [](const wire::TokenInput&) -> SessionLink::ReplyResult {
    return TimeoutError("no answer");
  };
  const Status st = Feed(*s, {1});
  EXPECT_EQ(st.kind(), ErrorKind::kTimeout);
  EXPECT_EQ(s->CacheLength(), 0u) << "a failed feed is not in the history";
}

TEST_F(RemoteSessionTest, AForkRebuildsFromItsSourcesHistory) {
  auto s = Open();
  ASSERT_TRUE(Feed(*s, {7, 8}).ok());
  Result<std::unique_ptr<RemoteSession>> fork = s->Fork();
  ASSERT_TRUE(fork.ok());
  ASSERT_TRUE(Feed(**fork, {9}).ok());
  link_.log.clear();
  link_.epoch_now = 1;
  ASSERT_TRUE(Feed(**fork, {6}).ok());
  const std::vector<std::string> expected{"release 101", "open 102", "feed 102@0:7,8,",
                                          "feed 102@2:9,", "feed 102@3:6,"};
  EXPECT_EQ(link_.log, expected);
}

TEST_F(RemoteSessionTest, RefusesBeforeSendingAnything) {
  auto s = Open();
  ASSERT_TRUE(Feed(*s, {1, 2, 3}).ok());
  link_.log.clear();
  const Status evict = s->Evict(2, 2);
  EXPECT_EQ(evict.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(evict.message(), "evict [2, 4) of a cache of 3 entries");
  EXPECT_EQ(Feed(*s, {}).kind(), ErrorKind::kInvalid);
  EXPECT_TRUE(link_.log.empty());
}

TEST_F(RemoteSessionTest, LogitsOfAnotherVocabularyAreCorrupt) {
  auto s = Open();
  link_.answer = [](const wire::TokenInput& in) {
    return SessionLink::ReplyResult(SessionLink::StepReply(
        wire::Logits{in.session_id, in.step, kVocab + 1, std::vector<float>(kVocab + 1), {}}));
  };
  const Status st = Feed(*s, {1});
  EXPECT_EQ(st.kind(), ErrorKind::kCorrupt);
  EXPECT_NE(st.message().find("sent 9 logits, the model has 8"), std::string::npos)
      << st.message();
}


// ---- multi-row steps --------------------------------------------------------

// A StepResult of `rows` step rows: row i chooses tokens[i] (the last row 0
// when tokens is shorter), each with its own chain state.
SessionLink::ReplyResult RowsReply(const wire::TokenInput& in, std::vector<uint32_t> tokens,
                                   size_t rows) {
  auto state = [](uint32_t i) { return WitnessChain(WitnessSeed{}, std::vector<uint32_t>{i}).Export(); };
  auto token = [&](size_t i) { return i < tokens.size() ? tokens[i] : 0u; };
  wire::StepResult r{in.session_id, in.step, token(0), Digest{0}, state(0), {}, {}};
  for (size_t i = 1; i < rows; ++i) {
    r.later_rows.push_back({token(i), Digest{static_cast<uint8_t>(i)}, state(static_cast<uint32_t>(i))});
  }
  return SessionLink::ReplyResult(SessionLink::StepReply(std::move(r)));
}

class RemoteRowsTest : public RemoteSessionTest {
 protected:
  Status FeedRows(RemoteSession& s, std::vector<uint32_t> tokens, uint32_t rows) {
    StepContext ctx{0, SamplingParams{}, &chain_, &scratch_, &logits_};
    return s.FeedRows(tokens, rows, ctx, &out_);
  }
  WitnessChain chain_{WitnessSeed{}, std::vector<uint32_t>{}};
  SamplingScratch scratch_;
  std::vector<float> logits_;
  RowSteps out_;
};

TEST_F(RemoteRowsTest, RowsAreKeptWhileTheyChooseTheTokenFedAfterThemAndTheRestEvicted) {
  auto s = Open();
  // Step rows are tokens 3, 5, 6, 7: rows 0 and 1 choose what was fed after
  // them (5, 6), row 2 chooses 2 where 7 was fed: three kept, one evicted.
  link_.answer = [](const wire::TokenInput& in) { return RowsReply(in, {5, 6, 2, 4}, in.step_rows); };
  ASSERT_TRUE(FeedRows(*s, {1, 2, 3, 5, 6, 7}, 4).ok());
  ASSERT_EQ(out_.steps.size(), 3u);
  EXPECT_EQ(out_.steps[2].token, 2u);
  EXPECT_EQ(out_.steps[1].logits_sha256, Digest{1});
  EXPECT_EQ(chain_.Export(), WitnessChain(WitnessSeed{}, std::vector<uint32_t>{2}).Export());
  EXPECT_EQ(s->CacheLength(), 5u);
  const std::vector<std::string> expected{"open 100", "feed 100@0:1,2,3,5,6,7, rows=4",
                                          "evict 100 5+1"};
  EXPECT_EQ(link_.log, expected);
}

TEST_F(RemoteRowsTest, ALongRunGoesInRequestsOfAtMostSixtyFourStepRows) {
  auto s = Open();
  link_.answer = [](const wire::TokenInput& in) {  // every row chooses the token fed after it
    const size_t first = in.token_ids.size() - in.step_rows;
    std::vector<uint32_t> chosen(in.token_ids.begin() + static_cast<ptrdiff_t>(first) + 1,
                                 in.token_ids.end());
    return RowsReply(in, chosen, in.step_rows);
  };
  std::vector<uint32_t> tokens{1, 2};
  tokens.resize(101, 0);  // every row chooses 0 (the last row of a request too)
  ASSERT_TRUE(FeedRows(*s, tokens, 100).ok());  // the prompt's last row and 99 more
  EXPECT_EQ(out_.steps.size(), 100u);
  EXPECT_EQ(s->CacheLength(), 101u);
  ASSERT_EQ(link_.log.size(), 3u);
  EXPECT_NE(link_.log[1].find("feed 100@0:"), std::string::npos);
  EXPECT_NE(link_.log[1].find(" rows=64"), std::string::npos) << link_.log[1];
  EXPECT_NE(link_.log[2].find("feed 100@65:"), std::string::npos) << link_.log[2];
  EXPECT_NE(link_.log[2].find(" rows=36"), std::string::npos) << link_.log[2];
}

TEST_F(RemoteRowsTest, AHostileLastStageIsCaughtByName) {
  struct Case {
    const char* name;
    std::function<SessionLink::ReplyResult(const wire::TokenInput&)> answer;
    const char* error;
  };
  const std::vector<Case> cases = {
      {"too few rows", [](const wire::TokenInput& in) { return RowsReply(in, {3}, 2); },
       "sent 2 step rows for a multi-row step of 3"},
      {"too many rows", [](const wire::TokenInput& in) { return RowsReply(in, {3}, 4); },
       "sent 4 step rows for a multi-row step of 3"},
      {"a token outside the vocabulary",
       [](const wire::TokenInput& in) { return RowsReply(in, {3, kVocab}, 3); },
       "sent token 8, the model's vocabulary has 8"},
      {"logits",
       [](const wire::TokenInput& in) {
         return SessionLink::ReplyResult(SessionLink::StepReply(
             wire::Logits{in.session_id, in.step, kVocab, std::vector<float>(kVocab), {}}));
       },
       "sent logits where a multi-row step's result"},
      {"digests of an untraced session",
       [](const wire::TokenInput& in) {
         SessionLink::ReplyResult r = RowsReply(in, {3}, 3);
         std::get<wire::StepResult>(*r).layer_digests.resize(6);
         return r;
       },
       "sent 6 layer digests for 3 step rows, expected 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto s = Open();
    link_.answer = c.answer;
    const Status st = FeedRows(*s, {1, 3, 4}, 3);
    EXPECT_EQ(st.kind(), ErrorKind::kCorrupt);
    EXPECT_NE(st.message().find(c.error), std::string::npos) << st.message();
  }
  // Rows answering an ordinary step, and a multi-row step of no rows.
  auto s = Open();
  link_.answer = [](const wire::TokenInput& in) { return RowsReply(in, {3}, 2); };
  StepContext ctx{0, SamplingParams{}, &chain_, &scratch_, &logits_};
  Result<StepOutcome> one = s->FeedAndChoose(std::vector<uint32_t>{1}, ctx);
  ASSERT_FALSE(one.ok());
  EXPECT_NE(one.status().message().find("sent 2 step rows for an ordinary step"), std::string::npos);
  EXPECT_EQ(FeedRows(*s, {1, 2}, 0).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(FeedRows(*s, {1, 2}, 3).kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep
