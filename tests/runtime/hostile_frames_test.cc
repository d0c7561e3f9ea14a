// A hidden frame with a correct SHA-256 is not authentication: sent to a
// later stage by a peer that is not its upstream stage (here another
// allowed coordinator), it is refused to that peer alone and the holder's
// decode equals the monolithic run.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli_runner.h"
#include "engine/ops/fp_env.h"
#include "keys/identity.h"
#include "runtime_test_util.h"
#include "wire/messages.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

TEST(HostileFrames, AHiddenFrameFromAPeerThatIsNotUpstreamIsRefused) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string model = MakeModel("hostile-frames", 4, 71);
  const std::string dir = MakeTempDir("hostile-frames");
  const keys::Identity other = keys::GenerateIdentity().value();
  ASSERT_TRUE(keys::WriteIdentity(other, dir + "/other").ok());
  auto procs = SpawnWorkerProcesses(2, {dir + "/other.pub"});
  ASSERT_TRUE(procs.ok()) << procs.status().ToString();
  ClusterConfig cfg;
  (*procs)->ApplyTo(&cfg);
  cfg.model_dir = model;
  cfg.heartbeat = 100ms;
  cfg.liveness = 10;
  zmq::context_t context(1);
  auto c = Coordinator::Start(context, cfg);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = (*c)->OpenSession(std::nullopt);  // session 1, on both workers
  ASSERT_TRUE(s.ok());

  wire::TransportOptions o;
  o.security.own = {other.pub.curve_public_z85, other.curve_secret_z85};
  o.security.server_public_z85 = cfg.worker_keys[1];
  auto attacker = wire::Client::Connect(context, cfg.workers[1], "attacker", o);
  ASSERT_TRUE(attacker.ok()) << attacker.status().ToString();
  const uint32_t hidden = static_cast<uint32_t>((*c)->model_config().hidden_size);
  wire::HiddenFrame frame{1, 0, 0, 1, hidden, 2, std::vector<float>(hidden, 0.5f), std::nullopt,
                          false, {}};
  ASSERT_TRUE(attacker->Send(wire::MarshalHidden(frame)).ok());
  auto in = attacker->Receive(5s);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  auto parsed = wire::ParseMessage(in->bytes());
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  const auto* refusal = std::get_if<wire::ErrorReport>(&*parsed);
  ASSERT_NE(refusal, nullptr);
  EXPECT_EQ(refusal->kind, ErrorKind::kInvalid);
  EXPECT_NE(refusal->message.find("upstream stage"), std::string::npos) << refusal->message;

  DecodeRequest req;
  req.prompt = {5, 4, 3, 2};
  req.gen = 6;
  auto r = RunDecode(**s, req, (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(model, req));
  EXPECT_TRUE((*c)->health().ok());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep::testing
