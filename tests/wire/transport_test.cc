#include "wire/transport.h"

#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <optional>

#include <unistd.h>

#include "tests/wire/wire_test_util.h"
#include "wire/hidden_frame.h"
#include "wire/messages.h"

namespace lockstep::wire {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kWait = 2000ms;  // generous bound for messages that must arrive

template <typename T>
T Expect(Result<T> r) {
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) std::abort();
  return std::move(r).value();
}

// A CURVE server and the options of one client it allows.
struct KeyedPair {
  TransportOptions server, client;
};
KeyedPair Keyed() {
  const CurveKeyPair server = GenerateCurveKeyPair().value();
  const CurveKeyPair client = GenerateCurveKeyPair().value();
  KeyedPair k;
  k.server.security.own = server;
  k.server.security.allowed_clients_z85 = {client.public_z85};
  k.client.security.own = client;
  k.client.security.server_public_z85 = server.public_z85;
  return k;
}

class TransportTest : public ::testing::Test {
 protected:
  zmq::context_t context_{1};
  KeyedPair keys_ = Keyed();
};

TEST_F(TransportTest, InprocRequestResponse) {
  Server server = Expect(Server::Bind(context_, "inproc://req-resp"));
  Client client = Expect(Client::Connect(context_, "inproc://req-resp", "worker-0"));

  Hello hello_out;
  hello_out.worker_id = "worker-0";
  ASSERT_TRUE(client.Send(MarshalMessage(hello_out)).ok());
  Incoming request = Expect(server.Receive(kWait));
  EXPECT_EQ(request.peer, "worker-0");
  Message hello = Expect(ParseMessage(request.bytes()));
  EXPECT_EQ(std::get<Hello>(hello).worker_id, "worker-0");

  ASSERT_TRUE(server.Send(request.peer, MarshalMessage(AssignAck{0, 0, 30})).ok());
  Incoming reply = Expect(client.Receive(kWait));
  EXPECT_TRUE(reply.peer.empty());
  Message ack = Expect(ParseMessage(reply.bytes()));
  EXPECT_EQ(std::get<AssignAck>(ack).layer_hi, 30u);
}

TEST_F(TransportTest, RepliesReachTheRightIdentity) {
  Server server = Expect(Server::Bind(context_, "inproc://two-clients"));
  Client a = Expect(Client::Connect(context_, "inproc://two-clients", "a"));
  Client b = Expect(Client::Connect(context_, "inproc://two-clients", "b"));
  ASSERT_TRUE(a.Send(MarshalMessage(Heartbeat{1, "a"})).ok());
  ASSERT_TRUE(b.Send(MarshalMessage(Heartbeat{1, "b"})).ok());
  for (int i = 0; i < 2; ++i) {
    Incoming in = Expect(server.Receive(kWait));
    ASSERT_TRUE(server.Send(in.peer, MarshalMessage(Shutdown{"for " + in.peer})).ok());
  }
  Message to_a = Expect(ParseMessage(Expect(a.Receive(kWait)).bytes()));
  Message to_b = Expect(ParseMessage(Expect(b.Receive(kWait)).bytes()));
  EXPECT_EQ(std::get<Shutdown>(to_a).reason, "for a");
  EXPECT_EQ(std::get<Shutdown>(to_b).reason, "for b");
}

TEST_F(TransportTest, ReceiveTimesOutWithinBounds) {
  Server server = Expect(Server::Bind(context_, "inproc://silent"));
  Client client = Expect(Client::Connect(context_, "inproc://silent", "quiet"));
  for (auto timeout : {0ms, 30ms, 120ms}) {
    const auto start = Clock::now();
    Result<Incoming> s = server.Receive(timeout);
    Result<Incoming> c = client.Receive(timeout);
    const auto elapsed = Clock::now() - start;
    EXPECT_EQ(s.status().kind(), ErrorKind::kTimeout);
    EXPECT_EQ(c.status().kind(), ErrorKind::kTimeout);
    EXPECT_GE(elapsed, 2 * timeout);
    EXPECT_LT(elapsed, 2 * timeout + 500ms);
  }
}

TEST_F(TransportTest, SendToUnknownPeerIsDisconnected) {
  Server server = Expect(Server::Bind(context_, "inproc://mandatory"));
  Status st = server.Send("nobody", MarshalMessage(Release{1}));
  EXPECT_EQ(st.kind(), ErrorKind::kDisconnected) << st.ToString();
}

TEST_F(TransportTest, SendTimesOutWhenQueueStaysFull) {
  TransportOptions options;
  options.security.insecure = true;
  options.send_timeout = 20ms;
  // Nothing listens there; the DEALER queues until its high-water mark.
  Client client = Expect(Client::Connect(context_, "tcp://127.0.0.1:1", "stuck", options));
  const Frame frame = MarshalMessage(Heartbeat{1, "stuck"});
  Status st;
  int sent = 0;
  const auto start = Clock::now();
  while (st.ok() && sent < 100000) {
    st = client.Send(frame);
    ++sent;
  }
  EXPECT_EQ(st.kind(), ErrorKind::kTimeout) << st.ToString();
  EXPECT_LT(Clock::now() - start, 2s);
}

TEST_F(TransportTest, OversizedMessagesAreRefused) {
  TransportOptions small;
  small.max_message_bytes = 1024;
  Server server = Expect(Server::Bind(context_, "inproc://oversized", small));
  Client big = Expect(Client::Connect(context_, "inproc://oversized", "big"));
  const Frame frame = MarshalHidden(testing::MakeHidden(1, 576, 1));
  ASSERT_GT(frame.size(), 1024u);
  ASSERT_TRUE(big.Send(frame).ok());
  Result<Incoming> in = server.Receive(kWait);
  EXPECT_EQ(in.status().kind(), ErrorKind::kInvalid) << in.status().ToString();

  Client limited = Expect(Client::Connect(context_, "inproc://oversized", "lim", small));
  EXPECT_EQ(limited.Send(frame).kind(), ErrorKind::kInvalid);
  EXPECT_EQ(server.Send("big", frame).kind(), ErrorKind::kInvalid);
}

TEST_F(TransportTest, PollReportsReadableSockets) {
  Server server = Expect(Server::Bind(context_, "inproc://poll"));
  Client a = Expect(Client::Connect(context_, "inproc://poll", "a"));
  Client b = Expect(Client::Connect(context_, "inproc://poll", "b"));
  std::array<zmq::socket_ref, 3> sockets{server.socket(), a.socket(), b.socket()};
  std::vector<bool> none = Expect(PollReadable(sockets, 20ms));
  EXPECT_EQ(none, (std::vector<bool>{false, false, false}));

  ASSERT_TRUE(a.Send(MarshalMessage(Heartbeat{1, "a"})).ok());
  std::vector<bool> ready = Expect(PollReadable(sockets, kWait));
  EXPECT_EQ(ready, (std::vector<bool>{true, false, false}));
  Incoming in = Expect(server.Receive(0ms));
  ASSERT_TRUE(server.Send(in.peer, MarshalMessage(Heartbeat{2, "server"})).ok());
  ready = Expect(PollReadable(sockets, kWait));
  EXPECT_EQ(ready, (std::vector<bool>{false, true, false}));
}

TEST_F(TransportTest, BadEndpointIsInvalid) {
  EXPECT_FALSE(Server::Bind(context_, "nonsense://x").ok());
  EXPECT_EQ(Client::Connect(context_, "inproc://x", "").status().kind(),
            ErrorKind::kInvalid);
}

TEST_F(TransportTest, IpcRequestResponse) {
  const std::string path = "/tmp/lockstep-wire-test-" + std::to_string(::getpid()) + ".sock";
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() { std::remove(path.c_str()); }
  } remove_socket_file{path};  // destroyed after the sockets below
  Server server = Expect(Server::Bind(context_, "ipc://" + path, keys_.server));
  Client client = Expect(Client::Connect(context_, server.endpoint(), "ipc-worker", keys_.client));
  const Frame frame = MarshalHidden(testing::MakeHidden(2, 576, 30));
  ASSERT_TRUE(client.Send(frame).ok());
  Incoming in = Expect(server.Receive(kWait));
  EXPECT_EQ(in.peer, "ipc-worker");
  ASSERT_EQ(in.body.size(), frame.size());
  EXPECT_EQ(std::memcmp(in.body.data(), frame.data(), frame.size()), 0);
  ASSERT_TRUE(server.Send(in.peer, MarshalMessage(Release{4})).ok());
  Message reply = Expect(ParseMessage(Expect(client.Receive(kWait)).bytes()));
  EXPECT_EQ(std::get<Release>(reply).session_id, 4u);
}

class TcpTransportTest : public TransportTest {
 protected:
  void SetUp() override {
    server_.emplace(Expect(Server::Bind(context_, "tcp://127.0.0.1:*", keys_.server)));
    ASSERT_NE(server_->endpoint().find("tcp://127.0.0.1:"), std::string::npos);
    ASSERT_EQ(server_->endpoint().find(":*"), std::string::npos);
  }
  std::optional<Server> server_;
};

TEST_F(TcpTransportTest, HiddenFrameArrivesBitIdentical) {
  Client client = Expect(Client::Connect(context_, server_->endpoint(), "stage-1", keys_.client));
  HiddenFrame frame = testing::MakeHidden(64, 576, 21);
  std::vector<float> adversarial = testing::FloatsFromBits(testing::AdversarialBits());
  std::copy(adversarial.begin(), adversarial.end(), frame.payload.begin());
  const Frame bytes = MarshalHidden(frame);
  ASSERT_TRUE(client.Send(bytes).ok());

  Incoming in = Expect(server_->Receive(kWait));
  EXPECT_EQ(in.peer, "stage-1");
  ASSERT_EQ(in.body.size(), bytes.size());
  EXPECT_EQ(std::memcmp(in.body.data(), bytes.data(), bytes.size()), 0);
  HiddenFrame out = Expect(UnmarshalHidden(in.bytes()));
  EXPECT_TRUE(testing::SameBits(out.payload, frame.payload));
  EXPECT_EQ(out.session_id, frame.session_id);
  EXPECT_EQ(out.resume_layer, frame.resume_layer);
}

TEST_F(TcpTransportTest, BitFlippedInTransitIsDetected) {
  TransportOptions faulty = keys_.client;
  faulty.mutate_outgoing_for_testing = [](std::vector<uint8_t>& bytes) {
    bytes[bytes.size() - 40] ^= 0x04;  // a payload byte, just before the digest
  };
  Client client = Expect(Client::Connect(context_, server_->endpoint(), "flaky", faulty));
  HiddenFrame frame = testing::MakeHidden(1, 576, 22);
  frame.session_id = 3;
  frame.step = 8;
  ASSERT_TRUE(client.Send(MarshalHidden(frame)).ok());
  Incoming in = Expect(server_->Receive(kWait));
  Result<HiddenFrame> out = UnmarshalHidden(in.bytes());
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().kind(), ErrorKind::kCorrupt);
  EXPECT_EQ(out.status().message(), "hidden frame digest mismatch (session 3 step 8)");
}

TEST_F(TcpTransportTest, ReceiveTimesOutOverTcp) {
  Client client = Expect(Client::Connect(context_, server_->endpoint(), "idle", keys_.client));
  const auto start = Clock::now();
  EXPECT_EQ(server_->Receive(80ms).status().kind(), ErrorKind::kTimeout);
  EXPECT_EQ(client.Receive(80ms).status().kind(), ErrorKind::kTimeout);
  const auto elapsed = Clock::now() - start;
  EXPECT_GE(elapsed, 160ms);
  EXPECT_LT(elapsed, 1s);
}

}  // namespace
}  // namespace lockstep::wire
