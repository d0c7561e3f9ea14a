// Hostile peers against real `lockstep worker` processes over TCP with
// CURVE: a second client speaking the protocol with no key, an unlisted
// key, or an allowed key as another coordinator. It must learn nothing and
// change nothing: refusals go to it alone (naming the cause or the limit),
// and the legitimate coordinator's decode equals the monolithic run.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <thread>

#include "cli_runner.h"
#include "engine/ops/fp_env.h"
#include "keys/identity.h"
#include "runtime_test_util.h"
#include "wire/messages.h"
#include "wire/transport.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

class HostilePeers : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ops::PinFpEnvironment().ok());
    model_ = MakeModel("hostile", 4, 21);
    dir_ = MakeTempDir("hostile-keys");
    const keys::Identity other = keys::GenerateIdentity().value();
    ASSERT_TRUE(keys::WriteIdentity(other, dir_ + "/other").ok());
    other_ = {other.pub.curve_public_z85, other.curve_secret_z85};
    auto procs = SpawnWorkerProcesses(3, {dir_ + "/other.pub"});
    ASSERT_TRUE(procs.ok()) << procs.status().ToString();
    procs_ = std::move(procs).value();
    procs_->ApplyTo(&cfg_);
    worker_keys_ = cfg_.worker_keys;
    // The cluster uses workers 0 and 1; worker 2 stays unassigned.
    cfg_.workers.resize(2);
    cfg_.worker_keys.resize(2);
    cfg_.model_dir = model_;
    cfg_.heartbeat = 100ms;
    cfg_.liveness = 10;
  }
  void TearDown() override {
    if (procs_) procs_->Reap(1s);
    std::filesystem::remove_all(dir_);
  }

  wire::Client Attacker(size_t worker, const wire::CurveKeyPair& key, const std::string& pin) {
    wire::TransportOptions o;
    if (key.public_z85.empty()) {
      o.security.insecure = true;
    } else {
      o.security.own = key;
      o.security.server_public_z85 = pin;
    }
    auto c = wire::Client::Connect(context_, procs_->endpoints()[worker],
                                   wire::UnguessableIdentity("attacker"), o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  // Sends `m` and returns the worker's ErrorReport to it (fails otherwise).
  wire::ErrorReport Refusal(wire::Client& c, const wire::Message& m) {
    EXPECT_TRUE(c.Send(wire::MarshalMessage(m)).ok());
    auto in = c.Receive(5s);
    EXPECT_TRUE(in.ok()) << wire::MessageName(m) << ": " << in.status().ToString();
    if (!in.ok()) return {};
    auto parsed = wire::ParseMessage(in->bytes());
    EXPECT_TRUE(parsed.ok());
    auto* r = parsed.ok() ? std::get_if<wire::ErrorReport>(&*parsed) : nullptr;
    EXPECT_NE(r, nullptr) << "expected an ErrorReport for " << wire::MessageName(m);
    return r ? *r : wire::ErrorReport{};
  }

  DecodeRequest Req(uint32_t gen) const {
    DecodeRequest r;
    r.prompt = {5, 4, 3, 2};
    r.gen = gen;
    return r;
  }

  wire::Assign SomeAssign(const std::string& next_hop) const {
    wire::Assign a;
    a.model_dir = "/etc";  // probing: the worker must not hash it for a stranger
    a.layer_lo = 0;
    a.layer_hi = 4;
    a.is_first = true;
    a.is_last = next_hop.empty();
    a.next_hop = next_hop;
    return a;
  }

  std::string model_, dir_;
  wire::CurveKeyPair other_;
  std::vector<std::string> worker_keys_;
  std::unique_ptr<runtime::WorkerProcesses> procs_;
  ClusterConfig cfg_;
  zmq::context_t context_{1};
};

TEST_F(HostilePeers, WithoutAnAllowedKeyNothingGetsThroughEitherWay) {
  const wire::CurveKeyPair unlisted = wire::GenerateCurveKeyPair().value();
  std::vector<wire::Client> attackers;
  attackers.push_back(Attacker(0, {}, ""));                          // no key
  attackers.push_back(Attacker(0, unlisted, worker_keys_[0]));       // a key not on the list
  attackers.push_back(Attacker(0, other_, wire::GenerateCurveKeyPair()->public_z85));  // wrong pin
  for (wire::Client& a : attackers) {
    ASSERT_TRUE(a.Send(wire::MarshalMessage(wire::Heartbeat{1, "x"})).ok());
    ASSERT_TRUE(a.Send(wire::MarshalMessage(SomeAssign(""))).ok());
    ASSERT_TRUE(a.Send(wire::MarshalMessage(wire::Shutdown{"bye"})).ok());
  }
  for (wire::Client& a : attackers) {
    EXPECT_EQ(a.Receive(800ms).status().kind(), ErrorKind::kTimeout) << a.identity();
  }
  // The worker is alive and serves its coordinator, bit for bit.
  auto c = Coordinator::Start(context_, cfg_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(s.ok());
  auto r = RunDecode(**s, Req(8), (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(model_, Req(8)));
  (*c)->ShutdownWorkers("done");
}

TEST_F(HostilePeers, AnotherCoordinatorCannotTouchTheHoldersSessions) {
  auto c = Coordinator::Start(context_, cfg_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = (*c)->OpenSession(std::nullopt);  // session 1 now exists on both workers
  ASSERT_TRUE(s.ok());

  wire::Client first = Attacker(0, other_, worker_keys_[0]);
  wire::Client second = Attacker(1, other_, worker_keys_[1]);
  const wire::ErrorReport busy = Refusal(first, SomeAssign(procs_->endpoints()[1]));
  EXPECT_EQ(busy.kind, ErrorKind::kOverloaded);
  EXPECT_NE(busy.message.find("busy"), std::string::npos) << busy.message;
  EXPECT_NE(busy.message.find("coordinator"), std::string::npos) << busy.message;
  for (uint64_t id = 0; id < 4; ++id) {
    EXPECT_EQ(Refusal(first, wire::Release{id}).kind, ErrorKind::kInvalid);
    EXPECT_EQ(Refusal(second, wire::Release{id}).kind, ErrorKind::kInvalid);
  }
  EXPECT_EQ(Refusal(first, wire::Evict{1, 0, 1}).kind, ErrorKind::kInvalid);
  EXPECT_EQ(Refusal(first, wire::Fork{77, 1, 0}).kind, ErrorKind::kInvalid);
  wire::TokenInput steal;
  steal.session_id = 1;
  steal.step = 1;
  steal.first_position = 2;
  steal.token_ids = {1};
  EXPECT_EQ(Refusal(first, steal).kind, ErrorKind::kInvalid);
  const wire::ErrorReport stop = Refusal(second, wire::Shutdown{"mine now"});
  EXPECT_NE(stop.message.find("only the coordinator holding this worker"), std::string::npos)
      << stop.message;
  // 23 bytes of junk: an error for the sender, nothing for the victim.
  const std::vector<uint8_t> junk(23, 0x5a);
  ASSERT_TRUE(first.Send(junk).ok());
  ASSERT_TRUE(first.Receive(5s).ok());

  // The victim's session runs as if nobody else had spoken.
  auto r = RunDecode(**s, Req(8), (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(model_, Req(8)));
  EXPECT_TRUE((*c)->health().ok());
  (*c)->ShutdownWorkers("done");
}

// Relayed steps come from the last stage alone: another peer sending them
// to the first stage while the holder's decode relays its own is refused,
// to it alone, and the decode is untouched.
TEST_F(HostilePeers, RelayedStepsFromAnyoneButTheLastStageAreRefused) {
  auto c = Coordinator::Start(context_, cfg_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = (*c)->OpenSession(std::nullopt);  // session 1 on both workers
  ASSERT_TRUE(s.ok());
  const DecodeRequest req = Req(40);
  Result<DecodeResult> got = InternalError("not run");
  std::thread decode([&] {
    if (ops::PinFpEnvironment().ok()) got = RunDecode(**s, req, (*c)->seed());
  });
  wire::Client first = Attacker(0, other_, worker_keys_[0]);
  for (uint32_t step = 1; step <= 12; ++step) {
    wire::TokenInput forged;
    forged.session_id = 1;
    forged.step = step;
    forged.first_position = static_cast<uint32_t>(req.prompt.size()) + step - 1;
    forged.token_ids = {step};
    forged.handoff =
        wire::ChainHandoff{step, WitnessChain((*c)->seed(), req.prompt).Export(), 40 - step - 1};
    forged.relayed = true;
    const wire::ErrorReport r = Refusal(first, forged);
    EXPECT_EQ(r.kind, ErrorKind::kInvalid);
    EXPECT_NE(r.message.find("only the coordinator holding this worker or its upstream stage"),
              std::string::npos)
        << r.message;
  }
  decode.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameDecode(*got, Monolithic(model_, req));
  EXPECT_TRUE((*c)->health().ok());
  (*c)->ShutdownWorkers("done");
}

// The last stage itself (its key, taken from the loopback key directory)
// may send the first stage relayed steps and nothing else, and only the
// step a session expects: anything else fails that session, reported to
// the holder, naming why; the holder's next session decodes as monolithic.
TEST_F(HostilePeers, TheLastStageSendsTheFirstOnlyTheRelayedStepsItExpects) {
  auto c = Coordinator::Start(context_, cfg_);  // workers 0 and 1: 1 is the last stage
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const std::string dir = std::filesystem::path(procs_->coordinator_key_file()).parent_path();
  auto last = keys::ReadIdentity(dir + "/w1");
  ASSERT_TRUE(last.ok()) << last.status().ToString();
  wire::Client ring = Attacker(0, {last->pub.curve_public_z85, last->curve_secret_z85},
                               worker_keys_[0]);
  const DecodeRequest req = Req(6);
  struct Case {
    const char* what;
    std::function<wire::Message(uint64_t session)> message;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"a relayed step of a session that relays nothing",
       [&](uint64_t id) {
         wire::TokenInput t;
         t.session_id = id;
         t.step = 1;
         t.first_position = static_cast<uint32_t>(req.prompt.size());
         t.token_ids = {9};
         t.handoff = wire::ChainHandoff{1, WitnessChain((*c)->seed(), req.prompt).Export(), 0};
         t.relayed = true;
         return wire::Message(t);
       },
       "has no relayed step to come"},
      {"the same at a position the session has passed (refused for what it is, not where)",
       [&](uint64_t id) {
         wire::TokenInput t;
         t.session_id = id;
         t.step = 1;
         t.first_position = static_cast<uint32_t>(req.prompt.size()) - 1;
         t.token_ids = {9};
         t.handoff = wire::ChainHandoff{1, WitnessChain((*c)->seed(), req.prompt).Export(), 0};
         t.relayed = true;
         return wire::Message(t);
       },
       "has no relayed step to come"},
      {"a Release", [](uint64_t id) { return wire::Message(wire::Release{id}); },
       "it sends the first stage only relayed steps"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    auto victim = (*c)->OpenSession(std::nullopt);
    ASSERT_TRUE(victim.ok());
    std::vector<float> logits;
    ASSERT_TRUE((*victim)->Feed(req.prompt, &logits).ok());  // open and fed on both stages
    ASSERT_TRUE(ring.Send(wire::MarshalMessage(k.message((*victim)->id()))).ok());
    // Reported to the holder: the session's next step fails with the cause.
    Status st;
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (st.ok() && std::chrono::steady_clock::now() < until) {
      st = (*victim)->Feed(std::vector<uint32_t>{1}, &logits);
    }
    EXPECT_NE(st.message().find(k.expect), std::string::npos) << st.ToString();
    EXPECT_EQ(ring.Receive(200ms).status().kind(), ErrorKind::kTimeout)
        << "the refusal went to the last stage's link, not the holder";
  }
  auto s = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(s.ok());
  auto r = RunDecode(**s, req, (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(model_, req));
  EXPECT_TRUE((*c)->health().ok());
  (*c)->ShutdownWorkers("done");
}

// Not even the coordinator holding a worker may send it a relayed step.
TEST_F(HostilePeers, ARelayedStepFromTheHolderIsRefused) {
  wire::Client holder = Attacker(2, other_, worker_keys_[2]);
  // The Assign is admitted (it now holds worker 2); loading "/etc" fails.
  const wire::ErrorReport load = Refusal(holder, SomeAssign(""));
  EXPECT_NE(load.message.find("assign layers"), std::string::npos) << load.message;
  wire::TokenInput forged;
  forged.session_id = 1;
  forged.step = 1;
  forged.token_ids = {3};
  forged.handoff =
      wire::ChainHandoff{1, WitnessChain(WitnessSeed{}, forged.token_ids).Export(), 2};
  forged.relayed = true;
  const wire::ErrorReport r = Refusal(holder, forged);
  EXPECT_EQ(r.kind, ErrorKind::kInvalid);
  EXPECT_NE(r.message.find("refused a relayed step from the coordinator"), std::string::npos)
      << r.message;
}

TEST_F(HostilePeers, LimitsAndBadAssignmentsAreRefusedByName) {
  // A self-loop on the unassigned worker 2, and inconsistent assignments.
  wire::Client free_worker = Attacker(2, other_, worker_keys_[2]);
  const wire::ErrorReport loop = Refusal(free_worker, SomeAssign(procs_->endpoints()[2]));
  EXPECT_NE(loop.message.find("this worker itself"), std::string::npos) << loop.message;
  wire::Assign empty = SomeAssign("");
  empty.layer_hi = 0;
  EXPECT_NE(Refusal(free_worker, empty).message.find("empty layer range"), std::string::npos);
  wire::Assign inconsistent = SomeAssign("");
  inconsistent.is_last = false;
  EXPECT_NE(Refusal(free_worker, inconsistent).message.find("next hop"), std::string::npos);

  auto c = Coordinator::Start(context_, cfg_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  // An oversized prefill is refused by name before any work.
  auto big = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(big.ok());
  std::vector<float> logits;
  const std::vector<uint32_t> ids(Limits{}.max_prompt_tokens + 1, 7);
  const Status st = (*big)->Feed(ids, &logits);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid) << st.ToString();
  EXPECT_NE(st.message().find("max_prompt_tokens"), std::string::npos) << st.message();
  // A session flood: past the cap, sessions are refused by name.
  std::vector<std::unique_ptr<RemoteSession>> flood;
  Status refused;
  for (uint32_t i = 0; i < Limits{}.sessions_per_coordinator + 2 && refused.ok(); ++i) {
    auto s = (*c)->OpenSession(std::nullopt);
    ASSERT_TRUE(s.ok());
    refused = (*s)->Feed(std::vector<uint32_t>{1}, &logits);
    flood.push_back(std::move(s).value());
  }
  EXPECT_EQ(refused.kind(), ErrorKind::kOverloaded) << refused.ToString();
  EXPECT_NE(refused.message().find("sessions_per_"), std::string::npos) << refused.message();
  flood.clear();  // released
  big->reset();
  // A legitimate decode still completes with the monolithic digests.
  auto s = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(s.ok());
  auto r = RunDecode(**s, Req(6), (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(model_, Req(6)));
  (*c)->ShutdownWorkers("done");
}

// An Assign that cannot be carried out (here: a next hop without the key
// to pin for it) gets its error and nothing else: no Hello, no AssignAck,
// nothing loaded (before, the worker loaded the stage, said Hello, reported
// the missing key and acknowledged the assignment all the same).
TEST_F(HostilePeers, ABadAssignGetsItsErrorAndNoAck) {
  auto info = InspectModelDir(model_, ModelPins{});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  const WitnessSeed seed = info->Seed();
  wire::Assign a;
  a.model_dir = model_;
  a.expected_weights_sha256 = seed.weights_sha256;
  a.expected_config_sha256 = seed.config_sha256;
  a.expected_tokenizer_sha256 = seed.tokenizer_sha256;
  a.layer_lo = 0;
  a.layer_hi = 2;
  a.is_first = true;
  a.next_hop = procs_->endpoints()[1];  // and no next_hop_key to pin
  wire::Client holder = Attacker(2, other_, worker_keys_[2]);
  const wire::ErrorReport r = Refusal(holder, a);
  EXPECT_EQ(r.kind, ErrorKind::kInvalid);
  EXPECT_NE(r.message.find("no CURVE key for the next stage"), std::string::npos) << r.message;
  auto more = holder.Receive(1s);
  if (more.ok()) {
    auto m = wire::ParseMessage(more->bytes());
    ADD_FAILURE() << "after the error the worker sent "
                  << (m.ok() ? wire::MessageName(*m) : "junk");
  }
  // The same Assign with the key is carried out: Hello, then AssignAck.
  a.next_hop_key = worker_keys_[1];
  ASSERT_TRUE(holder.Send(wire::MarshalMessage(a)).ok());
  std::vector<std::string> got;
  while (got.size() < 2) {
    auto in = holder.Receive(10s);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    auto m = wire::ParseMessage(in->bytes());
    ASSERT_TRUE(m.ok());
    if (std::holds_alternative<wire::Heartbeat>(*m)) continue;
    got.emplace_back(wire::MessageName(*m));
  }
  EXPECT_EQ(got, (std::vector<std::string>{"hello", "assignAck"}));
}

TEST(WorkerCommand, RefusesBadListenPortsAndMissingKeys) {
  CliOutput port = RunCli({"worker", "--listen", "tcp://127.0.0.1:99999", "--insecure"});
  EXPECT_NE(port.exit_code, 0);
  EXPECT_NE(port.err.find("out of range"), std::string::npos) << port.err;
  CliOutput nokey = RunCli({"worker", "--listen", "tcp://127.0.0.1:*"});
  EXPECT_NE(nokey.exit_code, 0);
  EXPECT_NE(nokey.err.find("--key"), std::string::npos) << nokey.err;
}

}  // namespace
}  // namespace lockstep::testing
