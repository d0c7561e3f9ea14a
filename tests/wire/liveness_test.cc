#include "wire/liveness.h"

#include <gtest/gtest.h>

#include <array>
#include <thread>

#include "wire/messages.h"
#include "wire/transport.h"

namespace lockstep::wire {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

const HeartbeatOptions kOptions{100ms, 3};

TEST(PeerLivenessTest, SilentPeerDiesAfterLivenessIntervals) {
  const auto t0 = Clock::now();
  PeerLiveness peer(kOptions, t0);
  EXPECT_FALSE(peer.IsDead(t0 + 299ms));
  EXPECT_TRUE(peer.IsDead(t0 + 300ms));
}

TEST(PeerLivenessTest, AnyMessageResetsLiveness) {
  const auto t0 = Clock::now();
  PeerLiveness peer(kOptions, t0);
  peer.OnReceived(t0 + 250ms);
  EXPECT_FALSE(peer.IsDead(t0 + 500ms));
  EXPECT_TRUE(peer.IsDead(t0 + 550ms));
}

TEST(PeerLivenessTest, HeartbeatDueAfterOneIdleInterval) {
  const auto t0 = Clock::now();
  PeerLiveness peer(kOptions, t0);
  EXPECT_FALSE(peer.HeartbeatDue(t0 + 99ms));
  EXPECT_TRUE(peer.HeartbeatDue(t0 + 100ms));
  peer.OnSent(t0 + 100ms);
  EXPECT_FALSE(peer.HeartbeatDue(t0 + 150ms));
  EXPECT_EQ(peer.TimeUntilNextEvent(t0 + 150ms), 50ms);
  EXPECT_EQ(peer.TimeUntilNextEvent(t0 + 400ms), 0ms);
  EXPECT_EQ(peer.NextSequence(), 1u);
  EXPECT_EQ(peer.NextSequence(), 2u);
}

TEST(LivenessTableTest, ReapsOnlyDeadPeers) {
  const auto t0 = Clock::now();
  LivenessTable table(kOptions);
  table.OnReceived("a", t0);
  table.OnReceived("b", t0);
  table.OnReceived("b", t0 + 200ms);
  EXPECT_EQ(table.TimeUntilNextEvent(t0, 1s), 100ms);
  EXPECT_EQ(table.HeartbeatsDue(t0 + 100ms), (std::vector<std::string>{"a", "b"}));
  table.OnSent("a", t0 + 100ms);
  EXPECT_EQ(table.HeartbeatsDue(t0 + 150ms), (std::vector<std::string>{"b"}));
  EXPECT_EQ(table.ReapDead(t0 + 300ms), (std::vector<std::string>{"a"}));
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.Find("a"), nullptr);
  EXPECT_EQ(table.ReapDead(t0 + 500ms), (std::vector<std::string>{"b"}));
  EXPECT_EQ(table.TimeUntilNextEvent(t0, 1s), 1s);
}

// A worker heartbeats for a while, then stalls without disconnecting; the
// server's poll loop must declare it dead within interval * liveness plus
// one scheduling slack.
TEST(LivenessIntegrationTest, StalledPeerIsDeclaredDeadWithinBound) {
  const HeartbeatOptions options{40ms, 3};
  const auto bound = options.interval * options.liveness;
  zmq::context_t context(1);
  Server server = Server::Bind(context, "inproc://liveness").value();
  Client client = Client::Connect(context, "inproc://liveness", "worker-7").value();

  std::thread worker([&client, options] {  // owns `client` from here on
    for (uint64_t seq = 1; seq <= 5; ++seq) {
      ASSERT_TRUE(client.Send(MarshalMessage(Heartbeat{seq, "worker-7"})).ok());
      std::this_thread::sleep_for(options.interval);
    }
    // Stall: stay connected but silent.
  });

  LivenessTable table(options);
  Clock::time_point last_heard{};
  Clock::time_point declared_dead{};
  int heartbeats = 0;
  const auto give_up = Clock::now() + 5s;
  while (declared_dead == Clock::time_point{} && Clock::now() < give_up) {
    Result<Incoming> in = server.Receive(table.TimeUntilNextEvent(Clock::now(), 50ms));
    const auto now = Clock::now();
    if (in.ok()) {
      ASSERT_TRUE(ParseMessage(in->bytes()).ok());
      table.OnReceived(in->peer, now);
      last_heard = now;
      ++heartbeats;
    } else {
      ASSERT_EQ(in.status().kind(), ErrorKind::kTimeout);
    }
    for (const std::string& dead : table.ReapDead(now)) {
      EXPECT_EQ(dead, "worker-7");
      declared_dead = now;
    }
  }
  worker.join();
  EXPECT_EQ(heartbeats, 5);
  ASSERT_NE(declared_dead, Clock::time_point{}) << "peer never declared dead";
  EXPECT_GE(declared_dead - last_heard, bound);
  EXPECT_LT(declared_dead - last_heard, bound + 100ms);
}

}  // namespace
}  // namespace lockstep::wire
