// A coordinator that a worker does not trust learns why at once: its key
// is refused (ZAP), named as such, instead of a handshake that times out.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/ops/fp_env.h"
#include "keys/identity.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

class AuthErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ops::PinFpEnvironment().ok());
    model_ = MakeModel("auth-errors", 4, 51);
    auto procs = SpawnWorkerProcesses(2);
    ASSERT_TRUE(procs.ok()) << procs.status().ToString();
    procs_ = std::move(procs).value();
    procs_->ApplyTo(&cfg_);
    cfg_.model_dir = model_;
    cfg_.heartbeat = 100ms;
    cfg_.liveness = 50;           // 5 s: a refusal must not wait for this
    cfg_.request_timeout = 20s;
    const keys::Identity other = keys::GenerateIdentity().value();
    other_ = {other.pub.curve_public_z85, other.curve_secret_z85};
  }
  std::string model_;
  std::unique_ptr<runtime::WorkerProcesses> procs_;
  ClusterConfig cfg_;
  wire::CurveKeyPair other_;
  zmq::context_t context_{1};
};

TEST_F(AuthErrors, AKeyOutsideTheAllowListIsReportedAsRefused) {
  cfg_.key = other_;  // no worker allows it
  const auto start = Clock::now();
  auto c = Coordinator::Start(context_, cfg_);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().kind(), ErrorKind::kInvalid) << c.status().ToString();
  EXPECT_NE(c.status().message().find("refused this coordinator's key"), std::string::npos)
      << c.status().message();
  // Every worker refuses the key; whichever refusal arrives first is named.
  const bool names_a_worker =
      std::any_of(cfg_.workers.begin(), cfg_.workers.end(), [&](const std::string& w) {
        return c.status().message().find(w) != std::string::npos;
      });
  EXPECT_TRUE(names_a_worker) << c.status().message();
  EXPECT_LT(Clock::now() - start, 3s);
}

// The coordinator pins a key for worker 1 that is not worker 1's (a stale
// or swapped .pub file): the handshake with it cannot complete, which the
// coordinator reports at once as a key mismatch naming the worker, instead
// of a worker that "did not answer".
TEST_F(AuthErrors, AWronglyPinnedWorkerKeyIsReportedAsAKeyMismatch) {
  cfg_.worker_keys[1] = other_.public_z85;
  const auto start = Clock::now();
  auto c = Coordinator::Start(context_, cfg_);
  ASSERT_FALSE(c.ok());
  const std::string m = c.status().message();
  EXPECT_EQ(c.status().kind(), ErrorKind::kMismatch) << c.status().ToString();
  EXPECT_NE(m.find(cfg_.workers[1]), std::string::npos) << m;
  EXPECT_NE(m.find("key"), std::string::npos) << m;
  EXPECT_EQ(m.find("did not answer"), std::string::npos) << m;
  EXPECT_LT(Clock::now() - start, 3s);
}

TEST_F(AuthErrors, TheTrustedCoordinatorStillConnects) {
  auto c = Coordinator::Start(context_, cfg_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
}

}  // namespace
}  // namespace lockstep::testing
