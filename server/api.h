// Api: the HTTP endpoints, independent of the transport.
//   POST /v1/completions, POST /v1/chat/completions  (OpenAI shape; SSE
//        when "stream": true, ending with data: [DONE]; our extensions:
//        window, evict, determinism_check, and a "receipt" object with
//        the digests, plan, options and seed)
//   GET  /v1/models, /healthz, /metrics (Prometheus text)
// A request's tokens are produced by the Scheduler; this layer turns them
// into text (stop strings cut, EOS not shown, incomplete UTF-8 held back
// while streaming) and notices a client that left (the session is then
// cancelled at once). Thread-safe: one Handle call per connection thread.
#pragma once

#include <atomic>
#include <string>
#include <vector>

#include "runtime/run_receipt.h"
#include "server/exchange.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/scheduler.h"

namespace lockstep::server {

struct StageInfo {
  std::string endpoint;  // "in-process" or a worker address
  int lo = 0, hi = 0;
};

struct ApiContext {
  ModelInfo model;
  std::vector<uint32_t> eos;
  runtime::RunSite site;          // seed, plan ("" in process) and the receipt's workers
  std::vector<StageInfo> stages;  // for /healthz, unless sharded (then cluster->stages())
  Scheduler* scheduler = nullptr;
  Metrics* metrics = nullptr;
  Coordinator* cluster = nullptr;  // set when serving sharded (its health)
  std::string speculative_source = "prompt-lookup";  // options.speculative of speculative answers
};

class Api {
 public:
  explicit Api(ApiContext context) : ctx_(std::move(context)) {}

  void Handle(const std::string& method, const std::string& target, const std::string& body,
              Exchange& ex);
  // Sends an error (and counts it).
  void Fail(const ApiError& e, Exchange& ex);
  void SetShuttingDown() { shutting_down_ = true; }

 private:
  void Generate(const std::string& body, bool chat, Exchange& ex);
  void Respond(int status, const std::string& type, const std::string& body, Exchange& ex);

  ApiContext ctx_;
  std::atomic<uint64_t> next_id_{1};
  std::atomic<bool> shutting_down_{false};
};

}  // namespace lockstep::server
