// One decode engine under every front end: the same requests through
// `lockstep run --json` (monolithic and over 2 loopback workers), `serve`
// in process, `serve` over 2 workers and bench's batched decode give the
// same receipts byte for byte (the timings, which are not normative, and a
// cluster's worker addresses and keys, which differ between two clusters,
// aside). The oracle is `run`, the path the conformance vectors pin.
// And serve accepts exactly what run accepts (ValidateDecodeRequest).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "api_context.h"
#include "cli_runner.h"
#include "engine/ops/fp_env.h"
#include "runtime/bench.h"
#include "runtime/cluster_run.h"
#include "runtime/generated_text.h"
#include "runtime/model_tokenizer.h"
#include "runtime_test_util.h"
#include "server/api.h"
#include "server/request.h"
#include "tests/fixture_absent.h"

namespace lockstep::testing {
namespace {

using json = nlohmann::json;

class CapturedExchange final : public server::Exchange {
 public:
  bool Respond(int status, const std::string&, const std::string& body, int) override {
    status_ = status;
    body_ = body;
    return true;
  }
  bool BeginEvents() override { return false; }
  bool SendEvent(const std::string&) override { return false; }
  bool PeerGone() override { return false; }
  int status_ = 0;
  std::string body_;
};

struct Case {
  std::vector<std::string> run_args;  // after run --model DIR
  json body;                          // the same request for /v1/completions
  DecodeRequest req;                  // and for bench
};

std::vector<Case> Cases() {
  std::vector<Case> cases(4);
  cases[0] = {{"--ids", "1,2,3,4,5", "--gen", "6"}, {{"prompt", {1, 2, 3, 4, 5}}, {"max_tokens", 6}}, {}};
  cases[1] = {{"--ids", "7,8", "--gen", "3", "--evict", "0:1@1"},
              {{"prompt", {7, 8}}, {"max_tokens", 3}, {"evict", {"0:1@1"}}}, {}};
  cases[2] = {{"--ids", "9,10,11,12", "--gen", "5", "--window", "3"},
              {{"prompt", {9, 10, 11, 12}}, {"max_tokens", 5}, {"window", 3}}, {}};
  cases[3] = {{"--ids", "3,1,4", "--gen", "5", "--temperature", "0.75", "--top-k", "40", "--seed", "5"},
              {{"prompt", {3, 1, 4}}, {"max_tokens", 5}, {"temperature", 0.75}, {"top_k", 40},
               {"seed", 5}}, {}};
  cases[0].req.prompt = {1, 2, 3, 4, 5};
  cases[0].req.gen = 6;
  cases[1].req.prompt = {7, 8};
  cases[1].req.gen = 3;
  cases[1].req.evictions = {{0, 1, 1}};
  cases[2].req.prompt = {9, 10, 11, 12};
  cases[2].req.gen = 5;
  cases[2].req.window = 3;
  cases[3].req.prompt = {3, 1, 4};
  cases[3].req.gen = 5;
  cases[3].req.sampling = {0.75f, 40, 1.0f, 5};
  return cases;
}

// What two clusters' receipts may differ in: timings, and their workers'
// addresses and keys (the layer ranges stay).
json Normalized(json receipt) {
  receipt.erase("timings");
  for (json& w : receipt["workers"]) {
    w.erase("endpoint");
    w.erase("curve_public");
  }
  return receipt;
}

class OneEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ops::PinFpEnvironment().ok());
    dir_ = SharedPath("fixtures/conformance/tiny-llama");
    if (dir_.empty()) LOCKSTEP_FIXTURE_ABSENT();
    auto model = OpenModelDir(dir_, ModelPins{});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_.emplace(std::move(*model));
    auto tok = runtime::LoadModelTokenizer(model_->files);
    ASSERT_TRUE(tok.ok()) << tok.status().ToString();
    tokenizer_.emplace(std::move(*tok));
  }

  // The receipts of every case served by a scheduler over `backend`.
  std::vector<json> Served(server::SchedulerBackend backend, const std::string& plan,
                           std::vector<receipt::WorkerEntry> workers) {
    server::Metrics metrics;
    server::Scheduler scheduler(backend, model_->Seed(), &*tokenizer_,
                                model_->config.eos_token_ids, {}, metrics);
    server::Api api(TestApiContext(model_->config,
                                   runtime::RunSite{model_->Seed(), plan, std::move(workers)},
                                   scheduler, metrics, &*tokenizer_, backend.cluster));
    std::vector<json> out;
    for (const Case& c : Cases()) {
      CapturedExchange ex;
      api.Handle("POST", "/v1/completions", c.body.dump(), ex);
      EXPECT_EQ(ex.status_, 200) << ex.body_;
      out.push_back(json::parse(ex.body_)["receipt"]);
    }
    scheduler.Shutdown(std::chrono::milliseconds(0));
    return out;
  }

  std::string dir_;
  std::optional<OpenModel> model_;
  std::optional<Tokenizer> tokenizer_;
};

TEST_F(OneEngine, RunServeAndBenchGiveTheSameReceipts) {
  const std::vector<Case> cases = Cases();
  std::vector<json> run, run_sharded;
  for (const Case& c : cases) {
    std::vector<std::string> args = {"run", "--model", dir_, "--json"};
    args.insert(args.end(), c.run_args.begin(), c.run_args.end());
    const CliOutput mono = RunCli(args);
    ASSERT_EQ(mono.exit_code, 0) << mono.err;
    run.push_back(Normalized(LastLineJson(mono.out)));
    args.insert(args.end(), {"--workers", "2"});
    const CliOutput sharded = RunCli(args);
    ASSERT_EQ(sharded.exit_code, 0) << sharded.err;
    run_sharded.push_back(Normalized(LastLineJson(sharded.out)));
  }
  ASSERT_NE(run[0]["steps"], run[2]["steps"]);  // the cases differ

  const StageSpec all{0, model_->config.num_layers, true, true};
  auto stage = LoadStage(*model_, all, ComputeOptions{});
  ASSERT_TRUE(stage.ok()) << stage.status().ToString();
  const std::vector<json> in_process = Served({stage->stage.get(), nullptr}, "", {});

  std::vector<DecodeRequest> reqs;
  for (const Case& c : cases) reqs.push_back(c.req);
  auto batched = runtime::DecodeBatched(**stage, model_->Seed(), reqs, 2);
  ASSERT_TRUE(batched.ok()) << batched.status().ToString();

  InProcCluster cluster(2);
  auto coordinator = Coordinator::Start(cluster.context(), cluster.Config(dir_, {}));
  ASSERT_TRUE(coordinator.ok()) << coordinator.status().ToString();
  const std::vector<json> over_workers =
      Served({nullptr, coordinator->get()}, (*coordinator)->plan_text(),
             runtime::ReceiptWorkers(**coordinator));
  coordinator->reset();

  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    EXPECT_EQ(in_process[i].dump(), run[i].dump());
    EXPECT_EQ(Normalized(over_workers[i]).dump(), run_sharded[i].dump());
    const runtime::RunSite monolithic{model_->Seed(), "", {}};
    EXPECT_EQ(receipt::BuildReceipt(
                  runtime::RunReceiptInputs((*batched)[i], reqs[i], monolithic,
                                            runtime::DecodeText(&*tokenizer_,
                                                                (*batched)[i].generated)))
                  .dump(),
              run[i].dump());
  }
}

// A prefix entry whose sessions a worker dropped (here: the worker takes
// the coordinator for gone after 300 ms of silence) is forgotten, and the
// next request sharing that prefix is computed afresh: it succeeds, equal
// to its solo run, and so does every later one (never a lasting
// "unknown session").
TEST(ServedPrefix, AnEntryAWorkerDroppedIsRecomputed) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string dir = MakeModel("dropped_prefix", 2, 41);
  auto model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok());
  InProcCluster cluster(2, [](size_t, WorkerOptions& w) {
    w.orphan_after = std::chrono::milliseconds(300);
  });
  auto c = Coordinator::Start(cluster.context(),
                              cluster.Config(dir, {}, /*heartbeat_ms=*/3000, /*liveness=*/10));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  server::Metrics metrics;
  server::Scheduler scheduler({nullptr, c->get()}, (*c)->seed(), nullptr, {}, {}, metrics);
  const auto serve = [&](std::vector<uint32_t> prompt) -> std::optional<server::Finish> {
    server::GenerationSpec spec;
    spec.request.prompt = std::move(prompt);
    spec.request.gen = 4;
    auto submitted = scheduler.Submit(spec);
    auto* stream = std::get_if<std::shared_ptr<server::GenerationStream>>(&submitted);
    if (stream == nullptr) return std::nullopt;
    std::vector<uint32_t> tokens;
    std::optional<server::Finish> finish;
    while (!finish) (*stream)->Wait(std::chrono::milliseconds(100), &tokens, &finish);
    return finish;
  };
  const std::vector<uint32_t> shared = {5, 6, 7, 8, 9, 10};
  auto first = serve(shared);
  ASSERT_TRUE(first && first->reason == "length") << (first ? first->error : "refused");
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // the workers drop it all
  for (uint32_t tail : {11u, 12u}) {
    std::vector<uint32_t> prompt = shared;
    prompt.push_back(tail);
    auto got = serve(prompt);
    ASSERT_TRUE(got.has_value());
    ASSERT_EQ(got->reason, "length") << got->error;
    DecodeRequest req;
    req.prompt = prompt;
    req.gen = 4;
    ExpectSameDecode(got->result, Monolithic(dir, req));
  }
  scheduler.Shutdown(std::chrono::milliseconds(0));
}

// serve accepts what run accepts: a 2-token prompt and 3 tokens fit 4
// positions (the last token is never fed), and evictions make room.
TEST(ServeValidation, AcceptsWhatRunAccepts) {
  server::ModelInfo m;
  m.id = "m";
  m.vocab = 100;
  m.max_positions = 4;
  m.max_prompt_tokens = 100;
  const auto parse = [&](const json& body) {
    return server::ParseRequest(body.dump(), false, m, 1);
  };
  EXPECT_TRUE(std::holds_alternative<server::ParsedRequest>(
      parse({{"prompt", {1, 2}}, {"max_tokens", 3}})));
  EXPECT_TRUE(std::holds_alternative<server::ParsedRequest>(
      parse({{"prompt", {1, 2}}, {"max_tokens", 5}, {"evict", {"0:2@1"}}})));
  const auto over = parse({{"prompt", {1, 2}}, {"max_tokens", 4}});
  ASSERT_TRUE(std::holds_alternative<server::ApiError>(over));
  EXPECT_EQ(std::get<server::ApiError>(over).code, "context_length_exceeded");
  DecodeRequest same;
  same.prompt = {1, 2};
  same.gen = 4;
  same.max_positions = 4;
  EXPECT_FALSE(ValidateDecodeRequest(same).ok());  // run refuses it too
  const auto window = parse({{"prompt", {1}}, {"window", -1}});
  ASSERT_TRUE(std::holds_alternative<server::ApiError>(window));
}

}  // namespace
}  // namespace lockstep::testing
