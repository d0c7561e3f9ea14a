// A streamed request that fails after its headers (200) are sent ends with
// one error event, `data: {"error": {...}}`, the body the same request
// unstreamed would have had, and nothing after it (no [DONE]), as
// OpenAI-style streams end. Forced here by workers whose KV budget holds no
// entry at all: the scheduler admits the request, the stream begins, and
// the first stage refuses the prompt for capacity (workers_busy, 429 when
// unstreamed).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api_context.h"
#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

using json = nlohmann::json;

// Records what the API sends: one response, or the headers and each event.
class RecordedExchange final : public server::Exchange {
 public:
  bool Respond(int status, const std::string&, const std::string& body, int retry_after) override {
    status_ = status;
    body_ = body;
    retry_after_ = retry_after;
    return true;
  }
  bool BeginEvents() override {
    began_events_ = true;
    return true;
  }
  bool SendEvent(const std::string& data) override {
    events_.push_back(data);
    return true;
  }
  bool PeerGone() override { return false; }

  int status_ = 0;
  std::string body_;
  int retry_after_ = 0;
  bool began_events_ = false;
  std::vector<std::string> events_;
};

TEST(StreamedError, AWorkerRefusalAfterTheHeadersIsTheLastEventAndNoDone) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string dir = MakeModel("streamed_error", 2, 43);
  auto model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  InProcCluster cluster(2, [](size_t, WorkerOptions& w) { w.limits.kv_bytes_per_worker = 1; });
  auto coordinator = Coordinator::Start(cluster.context(), cluster.Config(dir, {}));
  ASSERT_TRUE(coordinator.ok()) << coordinator.status().ToString();

  server::Metrics metrics;
  server::Scheduler scheduler({nullptr, coordinator->get()}, (*coordinator)->seed(), nullptr, {},
                              {}, metrics);
  server::Api api(TestApiContext(model->config,
                                 runtime::RunSite{(*coordinator)->seed(),
                                                  (*coordinator)->plan_text(), {}},
                                 scheduler, metrics, nullptr, coordinator->get()));

  const json body = {{"prompt", {1, 2, 3, 4}}, {"max_tokens", 4}};
  RecordedExchange plain;
  api.Handle("POST", "/v1/completions", body.dump(), plain);
  ASSERT_EQ(plain.status_, 429) << plain.body_;
  EXPECT_EQ(plain.retry_after_, 1);
  const json plain_error = json::parse(plain.body_);
  EXPECT_EQ(plain_error["error"]["code"], "workers_busy") << plain.body_;
  EXPECT_NE(plain_error["error"]["message"].get<std::string>().find("kv_bytes_per_worker"),
            std::string::npos)
      << plain.body_;

  json streamed_body = body;
  streamed_body["stream"] = true;
  RecordedExchange streamed;
  api.Handle("POST", "/v1/completions", streamed_body.dump(), streamed);
  EXPECT_TRUE(streamed.began_events_) << "the scheduler admitted it: the headers went out";
  EXPECT_EQ(streamed.status_, 0) << "no second response after the headers";
  ASSERT_EQ(streamed.events_.size(), 1u) << "one error event, then nothing ([DONE] included)";
  const json event = json::parse(streamed.events_[0]);
  EXPECT_EQ(event["error"]["code"], "workers_busy") << streamed.events_[0];
  EXPECT_EQ(event["error"]["type"], plain_error["error"]["type"]);
  EXPECT_EQ(event.size(), 1u) << "the error alone, as OpenAI's stream errors";

  scheduler.Shutdown(std::chrono::milliseconds(0));
  coordinator->reset();
}

}  // namespace
}  // namespace lockstep::testing
