// CURVE links: a server accepts only allow-listed client keys (nothing is
// delivered either way for any other peer), a client completes only with
// the pinned server key, plaintext needs an explicit choice, and keys and
// endpoints are validated before any socket binds or connects.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "wire/endpoint.h"
#include "wire/link_security.h"
#include "wire/messages.h"
#include "wire/transport.h"

namespace lockstep::wire {
namespace {

using namespace std::chrono_literals;

// Long enough for a handshake on loopback to have completed several times.
constexpr auto kQuiet = 700ms;
constexpr auto kWait = 3000ms;

CurveKeyPair NewPair() {
  Result<CurveKeyPair> k = GenerateCurveKeyPair();
  EXPECT_TRUE(k.ok()) << k.status().ToString();
  return k.ok() ? *k : CurveKeyPair{};
}

class CurveTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_keys_ = NewPair();
    allowed_ = NewPair();
    TransportOptions o;
    o.security.own = server_keys_;
    o.security.allowed_clients_z85 = {allowed_.public_z85};
    Result<Server> s = Server::Bind(context_, "tcp://127.0.0.1:*", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_.emplace(std::move(s).value());
  }

  Client Connect(const std::string& identity, const CurveKeyPair& own,
                 const std::string& server_key) {
    TransportOptions o;
    o.security.own = own;
    o.security.server_public_z85 = server_key;
    Result<Client> c = Client::Connect(context_, server_->endpoint(), identity, o);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    if (!c.ok()) std::abort();
    return std::move(c).value();
  }

  // The client's frame reaches the server, which answers it.
  void ExpectServed(Client& client) {
    ASSERT_TRUE(client.Send(MarshalMessage(Heartbeat{1, client.identity()})).ok());
    Result<Incoming> in = server_->Receive(kWait);
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    EXPECT_EQ(in->peer, client.identity());
    ASSERT_TRUE(server_->Send(in->peer, MarshalMessage(Heartbeat{2, "server"})).ok());
    Result<Incoming> reply = client.Receive(kWait);
    ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  }

  // Nothing the client sends arrives, and the server cannot address it.
  void ExpectShutOut(Client& client) {
    ASSERT_TRUE(client.Send(MarshalMessage(Heartbeat{1, client.identity()})).ok());
    EXPECT_EQ(server_->Receive(kQuiet).status().kind(), ErrorKind::kTimeout);
    EXPECT_EQ(server_->Send(client.identity(), MarshalMessage(Shutdown{"x"})).kind(),
              ErrorKind::kDisconnected);
    EXPECT_EQ(client.Receive(100ms).status().kind(), ErrorKind::kTimeout);
  }

  zmq::context_t context_{1};
  CurveKeyPair server_keys_, allowed_;
  std::optional<Server> server_;
};

TEST_F(CurveTest, AllowedClientIsServedAndNamedByItsKey) {
  Client client = Connect("coordinator-a", allowed_, server_keys_.public_z85);
  ASSERT_TRUE(client.Send(MarshalMessage(Heartbeat{1, "a"})).ok());
  Result<Incoming> in = server_->Receive(kWait);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  EXPECT_EQ(in->peer_key, allowed_.public_z85);
  ASSERT_TRUE(server_->Send(in->peer, MarshalMessage(Heartbeat{2, "server"})).ok());
  Result<Incoming> reply = client.Receive(kWait);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_TRUE(reply->peer_key.empty());
}

TEST_F(CurveTest, ClientWithoutKeyGetsNothingThrough) {
  TransportOptions plain;
  plain.security.insecure = true;
  Client client =
      std::move(Client::Connect(context_, server_->endpoint(), "no-key", plain)).value();
  ExpectShutOut(client);
}

TEST_F(CurveTest, ClientWithUnlistedKeyGetsNothingThrough) {
  Client client = Connect("stranger", NewPair(), server_keys_.public_z85);
  ExpectShutOut(client);
}

TEST_F(CurveTest, ClientPinningAnotherServerKeyGetsNothingThrough) {
  // An allowed client key, but the server it reached is not the one pinned.
  Client client = Connect("misdirected", allowed_, NewPair().public_z85);
  ExpectShutOut(client);
}

TEST_F(CurveTest, AllowClientAdmitsAKeyLater) {
  const CurveKeyPair later = NewPair();
  ASSERT_TRUE(server_->AllowClient(later.public_z85).ok());
  Client client = Connect("upstream", later, server_keys_.public_z85);
  ExpectServed(client);
  EXPECT_EQ(server_->AllowClient("short").kind(), ErrorKind::kInvalid);
}

TEST_F(CurveTest, AllowListsArePerServer) {
  // A second server in the same context allows another key only.
  const CurveKeyPair other_server = NewPair();
  const CurveKeyPair other_client = NewPair();
  TransportOptions o;
  o.security.own = other_server;
  o.security.allowed_clients_z85 = {other_client.public_z85};
  Server second = std::move(Server::Bind(context_, "tcp://127.0.0.1:*", o)).value();
  TransportOptions c;
  c.security.own = allowed_;  // allowed on the first server, not on this one
  c.security.server_public_z85 = other_server.public_z85;
  Client client = std::move(Client::Connect(context_, second.endpoint(), "x", c)).value();
  ASSERT_TRUE(client.Send(MarshalMessage(Heartbeat{1, "x"})).ok());
  EXPECT_EQ(second.Receive(kQuiet).status().kind(), ErrorKind::kTimeout);
  EXPECT_EQ(server_->Receive(0ms).status().kind(), ErrorKind::kTimeout);
}

TEST_F(CurveTest, SecondPeerClaimingAnIdentityGetsNoReplies) {
  Client first = Connect("coordinator-1", allowed_, server_keys_.public_z85);
  ExpectServed(first);
  Client impostor = Connect("coordinator-1", allowed_, server_keys_.public_z85);
  ASSERT_TRUE(impostor.Send(MarshalMessage(Heartbeat{9, "impostor"})).ok());
  EXPECT_EQ(server_->Receive(kQuiet).status().kind(), ErrorKind::kTimeout);
  ASSERT_TRUE(server_->Send("coordinator-1", MarshalMessage(Heartbeat{3, "server"})).ok());
  EXPECT_TRUE(first.Receive(kWait).ok());
  EXPECT_EQ(impostor.Receive(200ms).status().kind(), ErrorKind::kTimeout);
}

TEST_F(CurveTest, MissingKeysNeedAnExplicitInsecureChoice) {
  Result<Server> s = Server::Bind(context_, "tcp://127.0.0.1:*");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(s.status().message().find("insecure"), std::string::npos) << s.status().message();
  EXPECT_EQ(Client::Connect(context_, server_->endpoint(), "c").status().kind(),
            ErrorKind::kInvalid);
  TransportOptions no_pin;
  no_pin.security.own = allowed_;
  Result<Client> c = Client::Connect(context_, server_->endpoint(), "c", no_pin);
  EXPECT_NE(c.status().message().find("server public key"), std::string::npos)
      << c.status().ToString();
  // inproc never leaves the process and needs no keys.
  EXPECT_TRUE(Server::Bind(context_, "inproc://in-process").ok());
}

TEST_F(CurveTest, MalformedOrMismatchedKeysAreRefusedWithoutEchoingThem) {
  const CurveKeyPair a = NewPair(), b = NewPair();
  TransportOptions mixed;
  mixed.security.own = {a.public_z85, b.secret_z85};
  Result<Server> s = Server::Bind(context_, "tcp://127.0.0.1:*", mixed);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("does not belong"), std::string::npos)
      << s.status().message();
  EXPECT_EQ(s.status().message().find(b.secret_z85), std::string::npos);

  TransportOptions bad_secret;
  bad_secret.security.own = {a.public_z85, std::string(40, '"')};  // '"' is not Z85
  Result<Server> t = Server::Bind(context_, "tcp://127.0.0.1:*", bad_secret);
  EXPECT_EQ(t.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(t.status().message().find("secret key"), std::string::npos) << t.status().message();

  TransportOptions bad_allowed;
  bad_allowed.security.own = a;
  bad_allowed.security.allowed_clients_z85 = {b.public_z85, "tooshort"};
  Result<Server> u = Server::Bind(context_, "tcp://127.0.0.1:*", bad_allowed);
  EXPECT_EQ(u.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(u.status().message().find("allowed client key #2"), std::string::npos)
      << u.status().message();
}

TEST(EndpointTest, PortsOutOfRangeAndMalformedEndpointsAreRefused) {
  for (const char* bad : {"tcp://127.0.0.1:99999", "tcp://127.0.0.1:65536", "tcp://127.0.0.1:",
                          "tcp://127.0.0.1:-1", "tcp://127.0.0.1:5x", "tcp://:5555",
                          "tcp://127.0.0.1", "udp://1.2.3.4:5", "ipc://", "inproc://", ""}) {
    const Status st = ValidateEndpoint(bad, EndpointUse::kBind);
    EXPECT_EQ(st.kind(), ErrorKind::kInvalid) << bad;
    EXPECT_NE(st.message().find(std::string("'") + bad + "'"), std::string::npos) << st.message();
  }
  EXPECT_NE(ValidateEndpoint("tcp://127.0.0.1:99999", EndpointUse::kBind).message().find(
                "out of range"),
            std::string::npos);
  for (const char* good : {"tcp://127.0.0.1:1", "tcp://0.0.0.0:65535", "tcp://*:*",
                           "tcp://[::1]:5555", "tcp://host.example:0", "ipc:///tmp/x",
                           "inproc://x"}) {
    EXPECT_TRUE(ValidateEndpoint(good, EndpointUse::kBind).ok()) << good;
  }
  EXPECT_FALSE(ValidateEndpoint("tcp://127.0.0.1:*", EndpointUse::kConnect).ok());
  EXPECT_FALSE(ValidateEndpoint("tcp://*:5555", EndpointUse::kConnect).ok());

  zmq::context_t context(1);
  TransportOptions plain;
  plain.security.insecure = true;
  Result<Server> s = Server::Bind(context, "tcp://127.0.0.1:99999", plain);
  EXPECT_EQ(s.status().kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep::wire
