// Several coordinators on the same three worker processes: with their own
// allowed keys or all with one config's key, started at once or while one
// of them decodes. Each either decodes with the digests of its solo run or
// is refused at once with an error naming the cause (the worker is held by
// another coordinator); none gets a wrong result or a bare timeout, and the
// holder never notices the others.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include <filesystem>

#include "cli_runner.h"
#include "engine/ops/fp_env.h"
#include "keys/identity.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

void ExpectHeldByAnother(const Status& st) {
  EXPECT_EQ(st.kind(), ErrorKind::kOverloaded) << st.ToString();
  EXPECT_NE(st.message().find("is held by another coordinator"), std::string::npos)
      << st.message();
}

ClusterConfig OneConfig(const runtime::WorkerProcesses& procs, const std::string& model) {
  ClusterConfig cfg;
  procs.ApplyTo(&cfg);
  cfg.model_dir = model;
  cfg.heartbeat = 100ms;
  cfg.liveness = 20;
  cfg.request_timeout = 20s;
  return cfg;
}

// Starts a coordinator per config at once, each decoding a request of its
// own: each decodes with its solo digests or is refused within 5 s naming
// the cause. The first stage is claimed first, so a race cannot leave every
// coordinator holding some worker and none holding all: one decodes.
void RaceCoordinators(const std::vector<ClusterConfig>& cfgs, const std::string& model) {
  const size_t n = cfgs.size();
  std::vector<DecodeRequest> reqs(n);
  for (size_t i = 0; i < n; ++i) {
    reqs[i].prompt = {static_cast<uint32_t>(10 + i), 3, 5};
    reqs[i].gen = 8;
  }
  std::vector<Result<DecodeResult>> got(n, InvalidError("not run"));
  std::vector<Clock::duration> took(n);
  zmq::context_t context(1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      const auto start = Clock::now();
      auto c = Coordinator::Start(context, cfgs[i]);
      took[i] = Clock::now() - start;
      if (!c.ok()) {
        got[i] = c.status();
        return;
      }
      auto s = (*c)->OpenSession(std::nullopt);
      got[i] = s.ok() ? RunDecode(**s, reqs[i], (*c)->seed()) : Result<DecodeResult>(s.status());
    });
  }
  for (std::thread& t : threads) t.join();
  size_t succeeded = 0;
  for (size_t i = 0; i < n; ++i) {
    SCOPED_TRACE("coordinator " + std::to_string(i));
    if (got[i].ok()) {
      ++succeeded;
      ExpectSameDecode(*got[i], Monolithic(model, reqs[i]));
      continue;
    }
    ExpectHeldByAnother(got[i].status());
    EXPECT_LT(took[i], 5s) << "refused only after "
                           << std::chrono::duration_cast<std::chrono::milliseconds>(took[i]).count()
                           << " ms";
  }
  EXPECT_GE(succeeded, 1u);
  std::cerr << succeeded << " of " << n << " coordinators decoded\n";
}

TEST(ManyCoordinators, EachSucceedsExactlyOrIsRefusedByName) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string model = MakeModel("many-coordinators", 6, 61);
  constexpr int kCoordinators = 8;
  const std::string dir = MakeTempDir("many-coordinators");
  std::vector<wire::CurveKeyPair> keys;
  std::vector<std::string> allow;
  for (int i = 1; i < kCoordinators; ++i) {
    const keys::Identity id = keys::GenerateIdentity().value();
    const std::string file = dir + "/c" + std::to_string(i);
    ASSERT_TRUE(keys::WriteIdentity(id, file).ok());
    keys.push_back({id.pub.curve_public_z85, id.curve_secret_z85});
    allow.push_back(file + ".pub");
  }
  auto procs = SpawnWorkerProcesses(3, allow);
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  const ClusterConfig cfg = OneConfig(**procs, model);
  keys.insert(keys.begin(), cfg.key);  // coordinator 0: the key the workers were made for
  std::vector<ClusterConfig> cfgs(kCoordinators, cfg);
  for (int i = 0; i < kCoordinators; ++i) cfgs[i].key = keys[static_cast<size_t>(i)];
  RaceCoordinators(cfgs, model);
  std::filesystem::remove_all(dir);
}

// `lockstep coordinator --config C` run while `serve --config C` holds the
// workers: the same key, another connection. It is refused at once, naming
// the worker and that another coordinator holds it, and the holder's decode
// in flight and its later ones are those of the monolithic run. Once the
// holder is gone (its connections closed), the same key takes the workers
// at once, as a restarted coordinator should.
TEST(ManyCoordinators, ASecondWithTheHoldersKeyIsRefusedAtOnceAndTheHolderGoesOn) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string model = MakeModel("same-key", 6, 62);
  auto procs = SpawnWorkerProcesses(3);
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  const ClusterConfig cfg = OneConfig(**procs, model);
  zmq::context_t context(1);
  auto holder = Coordinator::Start(context, cfg);
  ASSERT_TRUE(holder.ok()) << holder.status().ToString();
  auto session = (*holder)->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  DecodeRequest req;
  req.prompt = {4, 8, 15, 16};
  req.gen = 120;
  std::atomic<bool> done{false};
  Result<DecodeResult> got = InternalError("not run");
  std::thread decode([&] {
    if (ops::PinFpEnvironment().ok()) got = RunDecode(**session, req, (*holder)->seed());
    done.store(true);
  });
  int refused = 0;
  do {
    const auto start = Clock::now();
    auto second = Coordinator::Start(context, cfg);
    if (second.ok()) {  // not ASSERT: the decode thread is joined below
      ADD_FAILURE() << "a second coordinator took the workers over";
      break;
    }
    ExpectHeldByAnother(second.status());
    EXPECT_NE(second.status().message().find(cfg.workers[0]), std::string::npos)
        << second.status().message();
    EXPECT_LT(Clock::now() - start, 3s);
    ++refused;
  } while (!done.load() && refused < 5);
  decode.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameDecode(*got, Monolithic(model, req));
  // The holder still holds every worker: another session decodes exactly.
  auto again = (*holder)->OpenSession(std::nullopt);
  ASSERT_TRUE(again.ok());
  req.gen = 8;
  auto later = RunDecode(**again, req, (*holder)->seed());
  ASSERT_TRUE(later.ok()) << later.status().ToString();
  ExpectSameDecode(*later, Monolithic(model, req));
  EXPECT_TRUE((*holder)->health().ok());
  again->reset();
  session->reset();
  holder->reset();
  // The holder is gone: the same key takes the workers (its links close
  // within a few milliseconds of the process or Coordinator going).
  const auto start = Clock::now();
  Result<std::unique_ptr<Coordinator>> next = InternalError("not started");
  do {
    next = Coordinator::Start(context, cfg);
  } while (!next.ok() && next.status().kind() == ErrorKind::kOverloaded &&
           Clock::now() - start < 1s);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  auto s = (*next)->OpenSession(std::nullopt);
  ASSERT_TRUE(s.ok());
  auto r = RunDecode(**s, req, (*next)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(model, req));
}

// Eight coordinators on one config (one key) at once: one holds the
// workers and decodes exactly; every other one is refused at once by name
// (before, 0 of 8 decoded, each after a 30 s timeout).
TEST(ManyCoordinators, EightOnOneConfigEachSucceedsExactlyOrIsRefusedAtOnce) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string model = MakeModel("one-config", 6, 63);
  constexpr int kCoordinators = 8;
  auto procs = SpawnWorkerProcesses(3);
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  RaceCoordinators(std::vector<ClusterConfig>(kCoordinators, OneConfig(**procs, model)), model);
}

}  // namespace
}  // namespace lockstep::testing
