// Workers without keys (`--insecure`: plaintext TCP), so no peer can be
// authenticated: a stranger's messages must still touch nothing of the
// holder's. Every session belongs to the connection that opened it (the
// holder on the first stage, the upstream stage on the others); a Release,
// Evict, Fork or step of it from any other connection is refused to that
// connection alone, and the holder's decode equals the monolithic run.
// Also the worker's own bookkeeping: a Release of an unknown session does
// not free a place under the session limit, and an Assign whose next hop
// is the worker itself under another name is refused.
#include <gtest/gtest.h>

#include <thread>

#include "engine/ops/fp_env.h"
#include "engine/witness.h"
#include "runtime_test_util.h"
#include "wire/messages.h"
#include "wire/transport.h"

namespace lockstep::testing {
namespace {

using namespace std::chrono_literals;

void OnTcp(size_t, WorkerOptions& o) { o.listen = "tcp://127.0.0.1:*"; }

class InsecurePeers : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ops::PinFpEnvironment().ok());
    model_ = MakeModel("insecure-peers", 6, 81);
  }

  ClusterConfig Config(InProcCluster& cluster) const {
    ClusterConfig cfg = cluster.Config(model_, {}, 100, 20);
    cfg.insecure = true;
    return cfg;
  }

  wire::Client Stranger(InProcCluster& cluster, size_t worker) {
    wire::TransportOptions o;
    o.security.insecure = true;
    auto c = wire::Client::Connect(context_, cluster.endpoints()[worker],
                                   wire::UnguessableIdentity("stranger"), o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  // Sends `frame` and expects an ErrorReport back, to this connection.
  static wire::ErrorReport Refused(wire::Client& c, const wire::Frame& frame, const char* what) {
    EXPECT_TRUE(c.Send(frame).ok());
    auto in = c.Receive(5s);
    EXPECT_TRUE(in.ok()) << what << ": " << in.status().ToString();
    if (!in.ok()) return {};
    auto parsed = wire::ParseMessage(in->bytes());
    const auto* r = parsed.ok() ? std::get_if<wire::ErrorReport>(&*parsed) : nullptr;
    EXPECT_NE(r, nullptr) << what << ": expected an ErrorReport";
    return r ? *r : wire::ErrorReport{};
  }

  static DecodeRequest Req(uint32_t gen) {
    DecodeRequest r;
    r.prompt = {9, 8, 7, 6};
    r.gen = gen;
    return r;
  }

  std::string model_;
  zmq::context_t context_{1};
};

// The attacks on a keyless cluster: a stranger steps, releases,
// evicts and forks the holder's sessions by their (sequential) ids on every
// stage, sends a later stage hidden frames and the first stage relayed
// steps, all while the holder decodes. Each is refused to the stranger
// alone; before, the refusals failed the holder's run and the Releases
// freed its sessions.
TEST_F(InsecurePeers, AStrangerCannotTouchTheHoldersSessionsNorFailItsRun) {
  InProcCluster cluster(3, OnTcp);
  auto c = Coordinator::Start(cluster.context(), Config(cluster));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  {  // The pipeline has carried a decode: every stage knows its upstream.
    auto warm = (*c)->OpenSession(std::nullopt);
    ASSERT_TRUE(warm.ok());
    auto r = RunDecode(**warm, Req(4), (*c)->seed());
    ASSERT_TRUE(r.ok()) << r.status().ToString();
  }
  auto s = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(s.ok());
  const uint64_t victim = (*s)->id();
  const DecodeRequest req = Req(60);
  Result<DecodeResult> got = InternalError("not run");
  std::thread decode([&] {
    if (ops::PinFpEnvironment().ok()) got = RunDecode(**s, req, (*c)->seed());
  });
  const uint32_t hidden = static_cast<uint32_t>((*c)->model_config().hidden_size);
  for (size_t w = 0; w < 3; ++w) {
    SCOPED_TRACE("worker " + std::to_string(w));
    wire::Client stranger = Stranger(cluster, w);
    for (uint64_t id = 1; id <= victim + 2; ++id) {
      wire::TokenInput step;
      step.session_id = id;
      step.step = 3;
      step.first_position = 6;
      step.token_ids = {1};
      Refused(stranger, wire::MarshalMessage(step), "a step");
      Refused(stranger, wire::MarshalMessage(wire::Evict{id, 0, 1}), "an Evict");
      Refused(stranger, wire::MarshalMessage(wire::Fork{100 + id, id, 0}), "a Fork");
      Refused(stranger, wire::MarshalMessage(wire::Release{id}), "a Release");
    }
    const wire::HiddenFrame frame{victim, 5, 5, 1, hidden, 2, std::vector<float>(hidden, 0.25f),
                                  std::nullopt, false, {}};
    Refused(stranger, wire::MarshalHidden(frame), "a hidden frame");
    wire::TokenInput relayed;
    relayed.session_id = victim;
    relayed.step = 2;
    relayed.first_position = static_cast<uint32_t>(req.prompt.size()) + 1;
    relayed.token_ids = {4};
    relayed.handoff = wire::ChainHandoff{2, WitnessChain((*c)->seed(), req.prompt).Export(), 1};
    relayed.relayed = true;
    Refused(stranger, wire::MarshalMessage(relayed), "a relayed step");
    Refused(stranger, std::vector<uint8_t>(23, 0x5a), "junk");
    const wire::ErrorReport stop = Refused(stranger, wire::MarshalMessage(wire::Shutdown{"x"}),
                                           "a Shutdown");
    EXPECT_NE(stop.message.find("only the coordinator holding this worker"), std::string::npos)
        << stop.message;
  }
  decode.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameDecode(*got, Monolithic(model_, req));
  EXPECT_TRUE((*c)->health().ok());
  // The holder's session is still held on every stage, and usable.
  for (size_t w = 0; w < 3; ++w) EXPECT_EQ(cluster.worker(w).session_count(), 1u) << w;
  std::vector<float> logits;
  EXPECT_TRUE((*s)->Feed(std::vector<uint32_t>{3}, &logits).ok());
}

// The session limit counts sessions held: a Release of a session the
// worker does not hold frees no place (before, each one did, so the
// worker took more sessions than its limit).
TEST_F(InsecurePeers, AReleaseOfAnUnknownSessionFreesNoPlaceUnderTheLimit) {
  InProcCluster cluster(2, [](size_t i, WorkerOptions& o) {
    OnTcp(i, o);
    o.limits.sessions_per_worker = 3;
  });
  auto c = Coordinator::Start(cluster.context(), Config(cluster));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::vector<std::unique_ptr<RemoteSession>> held;
  std::vector<float> logits;
  for (int i = 0; i < 3; ++i) {
    auto s = (*c)->OpenSession(std::nullopt);
    ASSERT_TRUE(s.ok());
    ASSERT_TRUE((*s)->Feed(std::vector<uint32_t>{1, 2}, &logits).ok()) << i;
    held.push_back(std::move(s).value());
  }
  for (uint64_t unknown : {990u, 991u, 992u}) {  // the holder's own, for sessions nobody has
    (*c)->Post(unknown, wire::MarshalMessage(wire::Release{unknown}), /*release=*/true);
  }
  auto over = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(over.ok());
  const Status st = (*over)->Feed(std::vector<uint32_t>{1, 2}, &logits);
  EXPECT_EQ(st.kind(), ErrorKind::kOverloaded) << st.ToString();
  EXPECT_NE(st.message().find("sessions_per_worker"), std::string::npos) << st.message();
  over->reset();
  // A real Release frees a place, and the next session decodes exactly.
  held.pop_back();
  auto s = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(s.ok());
  auto r = RunDecode(**s, Req(5), (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(model_, Req(5)));
}

// tcp://localhost:P is the worker bound to tcp://127.0.0.1:P: an Assign
// naming it as next hop (or as the ring's first stage) is a forwarding
// loop, refused before anything is loaded.
TEST_F(InsecurePeers, AnAssignLoopingBackUnderAnotherNameIsRefused) {
  InProcCluster cluster(1, OnTcp);
  const std::string bound = cluster.endpoints()[0];
  const std::string port = bound.substr(bound.rfind(':') + 1);
  wire::Client holder = Stranger(cluster, 0);
  for (const std::string& self : {"tcp://localhost:" + port, "tcp://0.0.0.0:" + port}) {
    SCOPED_TRACE(self);
    wire::Assign a;
    a.model_dir = model_;
    a.layer_lo = 0;
    a.layer_hi = 3;
    a.is_first = true;
    a.next_hop = self;
    const wire::ErrorReport loop = Refused(holder, wire::MarshalMessage(a), "a looping Assign");
    EXPECT_NE(loop.message.find("is this worker itself"), std::string::npos) << loop.message;
    a.layer_lo = 3;
    a.layer_hi = 6;
    a.is_first = false;
    a.is_last = true;
    a.next_hop.clear();
    a.ring_hop = self;
    const wire::ErrorReport ring = Refused(holder, wire::MarshalMessage(a), "a looping ring");
    EXPECT_NE(ring.message.find("ring hop"), std::string::npos) << ring.message;
  }
}

}  // namespace
}  // namespace lockstep::testing
