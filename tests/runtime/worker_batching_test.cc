// Batching in a worker: decode steps of different sessions that meet in a
// worker's queue run as one ForwardBatch/LogitsBatch pass, and every
// session still equals its solo monolithic run bit for bit.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"
#include "wire/messages.h"

namespace lockstep::testing {
namespace {

class WorkerBatching : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("batching", 4, 29)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }
  static std::string* model_;
};
std::string* WorkerBatching::model_ = nullptr;

DecodeRequest Request(uint32_t seed, bool sampled = false) {
  DecodeRequest r;
  for (uint32_t i = 0; i < 2 + seed % 5; ++i) r.prompt.push_back((seed * 53 + i * 97) % 512);
  r.gen = 10;
  if (seed % 3 == 1) r.evictions = {{0, 1, 2}};
  if (sampled && seed % 2 == 1) {  // odd sessions sample, even ones stay greedy
    r.sampling.temperature = 0.8f;
    r.sampling.top_p = 0.9f;
    r.sampling.seed = 100 + seed;
  }
  return r;
}

// Runs kSessions sessions at once on a cluster cut as `plan`; each must
// equal its monolithic run. Returns the rows the workers ran batched.
// threads: each worker's compute threads; sampled: odd sessions sample.
uint64_t RunConcurrent(const std::string& model, std::vector<LayerRange> plan, size_t max_batch,
                       std::chrono::milliseconds window, size_t threads = 1,
                       bool sampled = false) {
  constexpr int kSessions = 6;
  InProcCluster cluster(plan.size(), [&](size_t, WorkerOptions& o) {
    o.max_batch = max_batch;
    o.batch_window_for_testing = window;
    o.compute.threads = threads;
  });
  uint64_t rows = 0;
  {
    auto c = Coordinator::Start(cluster.context(), cluster.Config(model, plan));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) return 0;
    std::vector<Result<DecodeResult>> got(kSessions,
                                          Result<DecodeResult>(InternalError("not run")));
    std::vector<std::thread> threads;
    for (int s = 0; s < kSessions; ++s) {
      threads.emplace_back([&, s] {
        if (!ops::PinFpEnvironment().ok()) return;  // argmax reads floats here
        const DecodeRequest req = Request(s, sampled);
        auto session = (*c)->OpenSession(s == 2 ? std::optional<int>(4) : std::nullopt,
                                         req.sampling);
        if (!session.ok()) {
          got[s] = session.status();
          return;
        }
        got[s] = RunDecode(**session, req, (*c)->seed());
      });
    }
    for (auto& t : threads) t.join();
    for (int s = 0; s < kSessions; ++s) {
      SCOPED_TRACE("session " + std::to_string(s));
      EXPECT_TRUE(got[s].ok()) << got[s].status().ToString();
      if (!got[s].ok()) continue;
      ExpectSameDecode(*got[s], s == 2 ? Monolithic(model, Request(s, sampled), 4)
                                       : Monolithic(model, Request(s, sampled)));
    }
  }
  for (size_t i = 0; i < plan.size(); ++i) {
    const Worker& w = cluster.worker(i);
    EXPECT_LE(w.batched_steps() * 2, w.batched_rows()) << "a batched pass runs 2+ rows";
    EXPECT_LE(w.batched_rows(), w.batched_steps() * max_batch);
    rows += w.batched_rows();
  }
  return rows;
}

TEST_F(WorkerBatching, ConcurrentSessionsBatchAndEqualTheirSoloRuns) {
  // The window makes each worker wait for the other sessions' steps, so
  // batches of several rows happen whatever the scheduling.
  const uint64_t rows =
      RunConcurrent(*model_, {{0, 1}, {1, 3}, {3, 4}}, 16, std::chrono::milliseconds(40));
  EXPECT_GT(rows, 0u);
}

TEST_F(WorkerBatching, SampledSessionsOnTwoThreadWorkersEqualTheirSoloRuns) {
  // The last stage chooses a batch's tokens and hashes their logits on its
  // pool; greedy and sampled rows share that pass.
  const uint64_t rows = RunConcurrent(*model_, {{0, 2}, {2, 4}}, 16,
                                      std::chrono::milliseconds(40), 2, /*sampled=*/true);
  EXPECT_GT(rows, 0u);
}

TEST_F(WorkerBatching, SmallBatchesOnTwoStagesEqualTheirSoloRuns) {
  const uint64_t rows =
      RunConcurrent(*model_, {{0, 2}, {2, 4}}, 2, std::chrono::milliseconds(40));
  EXPECT_GT(rows, 0u);
}

TEST_F(WorkerBatching, OneWorkerDoesEverythingBatched) {
  const uint64_t rows = RunConcurrent(*model_, {{0, 4}}, 4, std::chrono::milliseconds(40));
  EXPECT_GT(rows, 0u);
}

TEST_F(WorkerBatching, MaxBatchOfOneNeverBatches) {
  EXPECT_EQ(RunConcurrent(*model_, {{0, 2}, {2, 4}}, 1, std::chrono::milliseconds(0)), 0u);
}

TEST_F(WorkerBatching, NoWindowStillEqualsSoloRuns) {
  (void)RunConcurrent(*model_, {{0, 1}, {1, 4}}, 16, std::chrono::milliseconds(0));
}

// Decode steps run inline on a worker's I/O thread when nothing is queued,
// else behind what is (here a long prefill keeps the compute thread busy
// while other sessions' steps arrive): either way each session equals its
// monolithic run, and its messages keep their order.
TEST_F(WorkerBatching, StepsBesideALongPrefillEqualTheirSoloRuns) {
  InProcCluster cluster(2);
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 1}, {1, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<DecodeRequest> reqs = {Request(0), Request(1), Request(2), Request(3)};
  reqs[0].prompt.clear();
  for (uint32_t i = 0; i < 96; ++i) reqs[0].prompt.push_back((i * 37 + 5) % 512);
  reqs[0].gen = 4;
  reqs[2].gen = 24;
  std::vector<Result<DecodeResult>> got(reqs.size(),
                                        Result<DecodeResult>(InternalError("not run")));
  for (int round = 0; round < 3; ++round) {
    std::vector<std::thread> threads;
    for (size_t s = 0; s < reqs.size(); ++s) {
      threads.emplace_back([&, s] {
        if (!ops::PinFpEnvironment().ok()) return;
        auto session = (*c)->OpenSession(std::nullopt);
        if (!session.ok()) {
          got[s] = session.status();
          return;
        }
        got[s] = RunDecode(**session, reqs[s], (*c)->seed());
      });
    }
    for (auto& t : threads) t.join();
    for (size_t s = 0; s < reqs.size(); ++s) {
      SCOPED_TRACE("round " + std::to_string(round) + " session " + std::to_string(s));
      ASSERT_TRUE(got[s].ok()) << got[s].status().ToString();
      ExpectSameDecode(*got[s], Monolithic(*model_, reqs[s]));
    }
  }
}

// A junk chain handoff among steps the last stage batches (the first
// stage corrupts one session's handoffs on their way, in well-formed
// frames): that session fails when its frame is parsed, naming the
// handoff, before it can join a batch; the sessions batched meanwhile are
// chosen and witnessed exactly as their solo runs.
TEST_F(WorkerBatching, AJunkChainHandoffFailsOnlyItsSessionAmongBatchedSteps) {
  constexpr int kSessions = 4;
  std::atomic<uint64_t> victim{~uint64_t{0}};
  InProcCluster cluster(2, [&](size_t i, WorkerOptions& o) {
    o.max_batch = 16;
    o.batch_window_for_testing = std::chrono::milliseconds(40);
    if (i != 0) return;
    o.next_hop_transport.mutate_outgoing_for_testing = [&](std::vector<uint8_t>& f) {
      Result<wire::Message> m = wire::ParseMessage(f);
      if (!m.ok()) return;
      auto* h = std::get_if<wire::HiddenFrame>(&*m);
      if (h == nullptr || h->session_id != victim.load() || !h->handoff) return;
      h->handoff->chain_state.bytes[104] = 63;  // num disagrees with the length
      f = wire::MarshalMessage(*h);             // a well-formed frame, its digest redone
    };
  });
  auto c = Coordinator::Start(cluster.context(), cluster.Config(*model_, {{0, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<std::unique_ptr<RemoteSession>> sessions;
  for (int s = 0; s < kSessions; ++s) {
    auto session = (*c)->OpenSession(std::nullopt, Request(s, true).sampling);
    ASSERT_TRUE(session.ok()) << session.status().ToString();
    sessions.push_back(std::move(*session));
  }
  victim = sessions[1]->id();
  std::vector<Result<DecodeResult>> got(kSessions, Result<DecodeResult>(InternalError("not run")));
  std::vector<std::thread> threads;
  for (int s = 0; s < kSessions; ++s) {
    threads.emplace_back([&, s] {
      if (!ops::PinFpEnvironment().ok()) return;
      got[s] = RunDecode(*sessions[s], Request(s, true), (*c)->seed());
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_FALSE(got[1].ok());
  EXPECT_EQ(got[1].status().kind(), ErrorKind::kCorrupt) << got[1].status().ToString();
  EXPECT_NE(got[1].status().message().find("chain handoff"), std::string::npos)
      << got[1].status().ToString();
  for (int s : {0, 2, 3}) {
    SCOPED_TRACE("session " + std::to_string(s));
    ASSERT_TRUE(got[s].ok()) << got[s].status().ToString();
    ExpectSameDecode(*got[s], Monolithic(*model_, Request(s, true)));
  }
  EXPECT_GT(cluster.worker(1).batched_rows(), 0u) << "the last stage ran batched passes";
}

}  // namespace
}  // namespace lockstep::testing
