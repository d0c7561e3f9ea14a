// FakeLink: a SessionLink with no worker and no socket, for RemoteSession
// tests. It logs every frame as text, in the order sent, and answers each
// request with `answer` (default: Logits of kVocab entries); nothing is
// ever relayed. Thread-compatible (one test thread).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <future>
#include <string>
#include <variant>
#include <vector>

#include "coordinator/session_link.h"

namespace lockstep {

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
      if (t->step_rows > 0) s += " rows=" + std::to_string(t->step_rows);
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

}  // namespace lockstep
