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
#include <variant>
#include <vector>

namespace lockstep {
namespace {

constexpr uint32_t kVocab = 8;

// Logs every frame as text, in the order sent; answers each request with
// `answer` (default: Logits of kVocab entries).
class FakeLink final : public SessionLink {
 public:
  FakeLink() {
    config_.vocab_size = static_cast<int>(kVocab);
    config_.num_layers = 2;
  }
  std::function<ReplyResult(const wire::TokenInput&)> answer = [](const wire::TokenInput& in) {
    return ReplyResult(StepReply(
        wire::Logits{in.session_id, in.step, kVocab, std::vector<float>(kVocab, 0.0f), {}}));
  };
  std::vector<std::string> log;
  uint64_t epoch_now = 0;

  std::future<ReplyResult> Request(uint64_t, uint32_t, wire::Frame frame, uint32_t) override {
    Result<wire::Message> m = wire::ParseMessage(frame);
    EXPECT_TRUE(m.ok());
    const auto& in = std::get<wire::TokenInput>(*m);
    log.push_back(Describe(*m));
    std::promise<ReplyResult> p;
    p.set_value(answer(in));
    return p.get_future();
  }
  std::future<ReplyResult> Expect(uint64_t, uint32_t) override {
    std::promise<ReplyResult> p;
    p.set_value(InvalidError("nothing relayed"));
    return p.get_future();
  }
  void Post(uint64_t, wire::Frame frame, bool) override {
    Result<wire::Message> m = wire::ParseMessage(frame);
    EXPECT_TRUE(m.ok());
    log.push_back(Describe(*m));
  }
  ReplyResult Await(std::future<ReplyResult> reply, uint64_t, uint32_t) override {
    return reply.get();
  }
  uint64_t NewSessionId() override { return next_id_++; }
  uint64_t epoch() const override { return epoch_now; }
  Status AwaitRecovery() const override { return Status::Ok(); }
  Status health() const override { return Status::Ok(); }
  bool ship_logits() const override { return false; }
  const ModelConfig& model_config() const override { return config_; }

 private:
  static std::string Describe(const wire::Message& m) {
    if (auto* t = std::get_if<wire::TokenInput>(&m)) {
      std::string s = "feed " + std::to_string(t->session_id) + "@" +
                      std::to_string(t->first_position) + ":";
      for (uint32_t id : t->token_ids) s += std::to_string(id) + ",";
      return s + (t->no_output ? " no_output" : "");
    }
    if (auto* e = std::get_if<wire::Evict>(&m)) {
      return "evict " + std::to_string(e->session_id) + " " + std::to_string(e->from) + "+" +
             std::to_string(e->count);
    }
    if (auto* o = std::get_if<wire::SessionOpen>(&m)) return "open " + std::to_string(o->session_id);
    if (auto* r = std::get_if<wire::Release>(&m)) return "release " + std::to_string(r->session_id);
    if (auto* f = std::get_if<wire::Fork>(&m)) {
      return "fork " + std::to_string(f->source_session_id) + "->" +
             std::to_string(f->new_session_id);
    }
    return wire::MessageName(m);
  }

  ModelConfig config_;
  uint64_t next_id_ = 100;
};

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

}  // namespace
}  // namespace lockstep
