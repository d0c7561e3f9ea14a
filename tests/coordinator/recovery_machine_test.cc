// RecoveryMachine on its own: which actions each event yields, in which
// order, and which state follows — the happy path, spares that refuse, die,
// stay silent or turn out to be another worker, no spare left, a second
// death during a recovery, and replies that are not the machine's. No
// socket, no thread, no clock: the times are made up. Recovery.* in
// tests/runtime shows the same rules with real workers killed.
#include "coordinator/recovery_machine.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = RecoveryMachine::Clock;
using Kind = RecoveryAction::Kind;
using State = RecoveryMachine::State;
using Actions = std::vector<RecoveryAction>;

const Clock::time_point kT0 = Clock::now();
constexpr std::chrono::milliseconds kTimeout{1000};

WitnessSeed Seed() {
  WitnessSeed s;
  s.weights_sha256.fill(1);
  s.tokenizer_sha256.fill(2);
  s.config_sha256.fill(3);
  s.table_digest.fill(4);
  s.inv_freq_table_digest.fill(5);
  return s;
}

std::string Worker(size_t k) { return "tcp://w" + std::to_string(k) + ":5555"; }
std::string Spare(size_t i) { return "tcp://spare" + std::to_string(i) + ":5555"; }

// `n` stages of 10 layers each on tcp://wK, and `spares` spares.
RecoveryMachine Machine(size_t n, size_t spares) {
  std::vector<RecoveryMachine::Stage> stages;
  for (size_t k = 0; k < n; ++k) {
    const int lo = static_cast<int>(10 * k);
    stages.push_back(RecoveryMachine::Stage{StageSpec{lo, lo + 10, k == 0, k + 1 == n}, Worker(k),
                                            "key" + std::to_string(k)});
  }
  std::vector<SpareWorker> list;
  for (size_t i = 0; i < spares; ++i) list.push_back(SpareWorker{Spare(i), "spare-key"});
  return RecoveryMachine(std::move(stages), std::move(list), Seed(), kTimeout);
}

wire::Hello GoodHello() {
  const WitnessSeed s = Seed();
  wire::Hello h;
  h.worker_id = "w";
  h.weights_sha256 = s.weights_sha256;
  h.config_sha256 = s.config_sha256;
  h.tokenizer_sha256 = s.tokenizer_sha256;
  h.table_digest = s.table_digest;
  h.inv_freq_table_digest = s.inv_freq_table_digest;
  return h;
}

// Stage k's ack as the worker sends it for a stage of 10 layers each.
wire::AssignAck AckOf(size_t k) {
  return wire::AssignAck{static_cast<uint32_t>(k), static_cast<uint32_t>(10 * k),
                         static_cast<uint32_t>(10 * k + 10), 0};
}

wire::Message Refusal(const std::string& why) {
  return wire::ErrorReport{ErrorKind::kInvalid, why, false, 0};
}

Status Dead(size_t k) {
  return DisconnectedError("worker " + Worker(k) + " (stage " + std::to_string(k) +
                           ") stopped answering");
}

std::vector<Kind> KindsOf(const Actions& actions) {
  std::vector<Kind> kinds;
  for (const RecoveryAction& a : actions) kinds.push_back(a.kind);
  return kinds;
}

// The actions of one kind, in order.
Actions Only(const Actions& actions, Kind kind) {
  Actions out;
  for (const RecoveryAction& a : actions) {
    if (a.kind == kind) out.push_back(a);
  }
  return out;
}

// Stage k answers its Assign: Hello, then AssignAck. The actions of both.
Actions Acknowledge(RecoveryMachine& m, size_t k, Clock::time_point now = kT0) {
  Actions out;
  EXPECT_TRUE(m.OnMessage(k, GoodHello(), now, &out));
  EXPECT_TRUE(m.OnMessage(k, AckOf(k), now, &out));
  return out;
}

TEST(RecoveryMachine, ADeadStageIsRebuiltOnTheSpareAndItsNeighboursRewired) {
  RecoveryMachine m = Machine(3, 1);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  EXPECT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kMarkStage, Kind::kLog, Kind::kBeginRecovery,
                                             Kind::kMarkStage, Kind::kLog, Kind::kAssignSpare}));
  EXPECT_EQ(out[0].status.message(), Dead(1).message()) << "marked dead first";
  EXPECT_EQ(out[0].endpoint, Worker(1));
  EXPECT_EQ(out[2].status.kind(), ErrorKind::kDisconnected);
  EXPECT_EQ(out[2].status.message(), Dead(1).message() + "; rebuilding its stage on a spare");
  EXPECT_EQ(out[3].endpoint, Spare(0)) << "the stage is published on the spare";
  EXPECT_NE(out[3].status.message().find("being rebuilt on the spare " + Spare(0)),
            std::string::npos)
      << out[3].status.message();
  EXPECT_EQ(out[4].text, "assigning layers [10,20) to the spare " + Spare(0));
  EXPECT_EQ(out[5].stage, 1u);
  EXPECT_EQ(out[5].endpoint, Spare(0));
  EXPECT_EQ(out[5].key, "spare-key");
  EXPECT_EQ(m.state(), State::kReassigning);
  EXPECT_EQ(m.rebuilding(), 1u);
  EXPECT_EQ(m.awaiting(), (std::vector<size_t>{1}));
  EXPECT_EQ(m.deadline(), kT0 + kTimeout);
  EXPECT_EQ(m.endpoint(1), Spare(0));
  EXPECT_EQ(m.key(1), "spare-key");
  EXPECT_EQ(m.Describe(1), "worker " + Spare(0) + " (stage 1, layers [10,20))");

  const Clock::time_point loaded = kT0 + 300ms;
  out = Acknowledge(m, 1, loaded);
  ASSERT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kRewire, Kind::kRewire}));
  EXPECT_EQ(out[0].stage, 0u);
  EXPECT_EQ(out[1].stage, 2u);
  EXPECT_EQ(m.state(), State::kRewiring);
  EXPECT_EQ(m.awaiting(), (std::vector<size_t>{0, 2}));
  EXPECT_EQ(m.deadline(), loaded + kTimeout) << "a wait of its own";

  out = Acknowledge(m, 0);
  EXPECT_TRUE(out.empty()) << "stage 2 is still awaited";
  EXPECT_EQ(m.state(), State::kRewiring);
  out = Acknowledge(m, 2);
  ASSERT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kLog, Kind::kMarkStage, Kind::kRecovered}));
  EXPECT_EQ(out[0].text, "stage 1 rebuilt: worker " + Spare(0) + " (stage 1, layers [10,20)) serves it");
  EXPECT_TRUE(out[1].status.ok());
  EXPECT_EQ(out[1].endpoint, Spare(0));
  EXPECT_EQ(m.state(), State::kHealthy);
  EXPECT_TRUE(m.awaiting().empty());
  EXPECT_FALSE(m.deadline().has_value());
}

TEST(RecoveryMachine, TheFirstAndTheLastStageAreNeighbours) {
  RecoveryMachine m = Machine(3, 1);
  Actions out;
  m.OnDead(0, Dead(0), kT0, &out);
  out = Acknowledge(m, 0);
  ASSERT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kRewire, Kind::kRewire}));
  EXPECT_EQ(out[0].stage, 2u) << "the last stage relays to the first";
  EXPECT_EQ(out[1].stage, 1u);
}

TEST(RecoveryMachine, TwoStagesRewireTheOneNeighbourOnceAndOneStageNone) {
  RecoveryMachine two = Machine(2, 1);
  Actions out;
  two.OnDead(1, Dead(1), kT0, &out);
  out = Acknowledge(two, 1);
  ASSERT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kRewire}));
  EXPECT_EQ(out[0].stage, 0u);

  RecoveryMachine one = Machine(1, 1);
  out.clear();
  one.OnDead(0, Dead(0), kT0, &out);
  out = Acknowledge(one, 0);
  EXPECT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kLog, Kind::kMarkStage, Kind::kRecovered}));
  EXPECT_EQ(one.state(), State::kHealthy);
}

TEST(RecoveryMachine, ASpareThatRefusesGivesWayToTheNextSpare) {
  RecoveryMachine m = Machine(3, 2);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  const Clock::time_point later = kT0 + 500ms;
  EXPECT_TRUE(m.OnMessage(1, Refusal("out of memory"), later, &out));
  ASSERT_FALSE(Only(out, Kind::kAssignSpare).empty());
  EXPECT_EQ(Only(out, Kind::kAssignSpare)[0].endpoint, Spare(1));
  EXPECT_EQ(out.back().kind, Kind::kAssignSpare) << "the send comes last";
  const Actions logs = Only(out, Kind::kLog);
  ASSERT_FALSE(logs.empty());
  EXPECT_NE(logs[0].text.find("worker " + Spare(0) +
                              " (stage 1, layers [10,20)) refused the assignment: out of memory"),
            std::string::npos)
      << logs[0].text;
  EXPECT_NE(logs[0].text.find("trying the next spare"), std::string::npos);
  EXPECT_EQ(m.state(), State::kReassigning);
  EXPECT_EQ(m.endpoint(1), Spare(1));
  EXPECT_EQ(m.deadline(), later + kTimeout) << "the next spare gets a full wait";
  out = Acknowledge(m, 1);
  EXPECT_EQ(m.state(), State::kRewiring);
}

TEST(RecoveryMachine, WithNoSpareListedADeathFailsTheClusterWithItsOwnStatus) {
  RecoveryMachine m = Machine(3, 0);
  Actions out;
  m.OnDead(2, Dead(2), kT0, &out);
  ASSERT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kMarkStage, Kind::kFail}));
  EXPECT_EQ(out[1].status.kind(), ErrorKind::kDisconnected);
  EXPECT_EQ(out[1].status.message(), Dead(2).message());
  EXPECT_EQ(m.state(), State::kFailed);
}

TEST(RecoveryMachine, WhenTheLastSpareRefusesTheFailureSaysNoSpareIsLeft) {
  RecoveryMachine m = Machine(3, 1);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  EXPECT_TRUE(m.OnMessage(1, Refusal("no"), kT0, &out));
  const Actions fail = Only(out, Kind::kFail);
  ASSERT_EQ(fail.size(), 1u);
  EXPECT_EQ(out.back().kind, Kind::kFail);
  EXPECT_EQ(fail[0].status.kind(), ErrorKind::kDisconnected) << "the death's kind";
  EXPECT_EQ(fail[0].status.message(),
            Dead(1).message() + "; no spare left to rebuild its stage on");
  const Actions marks = Only(out, Kind::kMarkStage);
  ASSERT_FALSE(marks.empty());
  EXPECT_EQ(marks.back().stage, 1u);
  EXPECT_EQ(marks.back().status.message(), fail[0].status.message());
  EXPECT_EQ(m.state(), State::kFailed);

  // A later death fails nothing twice: failed is final.
  out.clear();
  m.OnDead(0, Dead(0), kT0, &out);
  EXPECT_FALSE(m.OnMessage(1, AckOf(1), kT0, &out));
  m.OnTick(kT0 + 1h, &out);
  EXPECT_TRUE(out.empty());
}

TEST(RecoveryMachine, TheSparesUsedUpByOneRecoveryLeaveNoneForTheNext) {
  RecoveryMachine m = Machine(3, 1);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  Acknowledge(m, 1);
  Acknowledge(m, 0);
  Acknowledge(m, 2);
  ASSERT_EQ(m.state(), State::kHealthy);
  out.clear();
  m.OnDead(2, Dead(2), kT0, &out);
  ASSERT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kMarkStage, Kind::kFail}));
  EXPECT_EQ(out[1].status.message(), Dead(2).message() + "; no spare left to rebuild its stage on");
}

TEST(RecoveryMachine, TheDeadlinePassingWhileTheSpareLoadsTriesTheNextSpare) {
  RecoveryMachine m = Machine(3, 2);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  m.OnTick(kT0 + kTimeout - 1ms, &out);
  EXPECT_TRUE(out.empty()) << "not yet";
  EXPECT_TRUE(m.OnMessage(1, GoodHello(), kT0 + 10ms, &out)) << "a Hello is no ack";
  m.OnTick(kT0 + kTimeout, &out);
  const Actions logs = Only(out, Kind::kLog);
  ASSERT_FALSE(logs.empty());
  EXPECT_NE(logs[0].text.find("Timeout"), std::string::npos) << logs[0].text;
  EXPECT_NE(logs[0].text.find("worker " + Spare(0) + " (stage 1, layers [10,20)) did not "
                              "acknowledge its assignment within 1000 ms"),
            std::string::npos)
      << logs[0].text;
  ASSERT_EQ(Only(out, Kind::kAssignSpare).size(), 1u);
  EXPECT_EQ(m.endpoint(1), Spare(1));

  // The second spare's Hello is needed afresh: the first's does not count.
  out.clear();
  EXPECT_TRUE(m.OnMessage(1, AckOf(1), kT0 + kTimeout, &out));
  ASSERT_EQ(Only(out, Kind::kFail).size(), 1u) << "an ack without a Hello, and no spare left";
  EXPECT_NE(Only(out, Kind::kFail)[0].status.message().find("no spare left"), std::string::npos);
}

TEST(RecoveryMachine, TheDeadlinePassingWhileRewiringFailsNamingTheSilentNeighbour) {
  RecoveryMachine m = Machine(3, 2);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  Acknowledge(m, 1, kT0 + 100ms);
  Acknowledge(m, 0, kT0 + 200ms);
  out.clear();
  m.OnTick(kT0 + 100ms + kTimeout, &out);
  const Actions fail = Only(out, Kind::kFail);
  ASSERT_EQ(fail.size(), 1u);
  EXPECT_EQ(fail[0].status.kind(), ErrorKind::kTimeout);
  EXPECT_NE(fail[0].status.message().find("worker " + Worker(2) +
                                          " (stage 2, layers [20,30)) did not acknowledge"),
            std::string::npos)
      << fail[0].status.message();
  EXPECT_NE(fail[0].status.message().find("while re-wiring around worker " + Spare(0)),
            std::string::npos)
      << fail[0].status.message();
  EXPECT_TRUE(Only(out, Kind::kAssignSpare).empty()) << "spares are for the dead stage only";
  EXPECT_EQ(m.state(), State::kFailed);
}

TEST(RecoveryMachine, TheSpareDyingWhileItLoadsGivesWayToTheNextSpare) {
  RecoveryMachine m = Machine(3, 2);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  const Status spare_dead = DisconnectedError("worker " + Spare(0) + " closed its connection");
  m.OnDead(1, spare_dead, kT0 + 50ms, &out);
  EXPECT_EQ(out.front().kind, Kind::kMarkStage);
  EXPECT_EQ(out.front().endpoint, Spare(0)) << "the spare is marked dead before it is replaced";
  ASSERT_EQ(Only(out, Kind::kAssignSpare).size(), 1u);
  EXPECT_EQ(Only(out, Kind::kAssignSpare)[0].endpoint, Spare(1));
  EXPECT_TRUE(Only(out, Kind::kBeginRecovery).empty()) << "the same recovery goes on";
  EXPECT_EQ(m.state(), State::kReassigning);
}

TEST(RecoveryMachine, ANeighbourDyingWhileRewiredFailsTheCluster) {
  RecoveryMachine m = Machine(3, 2);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  Acknowledge(m, 1);
  out.clear();
  m.OnDead(2, Dead(2), kT0, &out);
  const Actions fail = Only(out, Kind::kFail);
  ASSERT_EQ(fail.size(), 1u);
  EXPECT_EQ(fail[0].status.kind(), ErrorKind::kDisconnected);
  EXPECT_NE(fail[0].status.message().find(Dead(2).message()), std::string::npos);
  EXPECT_NE(fail[0].status.message().find("while rebuilding worker " + Spare(0)),
            std::string::npos)
      << fail[0].status.message();
  EXPECT_TRUE(Only(out, Kind::kAssignSpare).empty()) << "a spare left is not used";
  EXPECT_EQ(m.state(), State::kFailed);
}

TEST(RecoveryMachine, AnotherStageDyingDuringARecoveryIsRebuiltAfterIt) {
  RecoveryMachine m = Machine(4, 2);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  m.OnDead(3, Dead(3), kT0, &out);  // neither loading nor awaited
  ASSERT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kMarkStage}));
  EXPECT_EQ(out[0].stage, 3u);
  EXPECT_EQ(m.state(), State::kReassigning);
  EXPECT_EQ(m.rebuilding(), 1u);

  Acknowledge(m, 1);
  Acknowledge(m, 0);
  out = Acknowledge(m, 2);
  ASSERT_EQ(Only(out, Kind::kRecovered).size(), 1u);
  // Its death is reported again (liveness still finds it dead).
  out.clear();
  m.OnDead(3, Dead(3), kT0 + 1s, &out);
  ASSERT_EQ(Only(out, Kind::kBeginRecovery).size(), 1u);
  ASSERT_EQ(Only(out, Kind::kAssignSpare).size(), 1u);
  EXPECT_EQ(Only(out, Kind::kAssignSpare)[0].stage, 3u);
  EXPECT_EQ(Only(out, Kind::kAssignSpare)[0].endpoint, Spare(1)) << "each spare is used once";
  EXPECT_EQ(m.rebuilding(), 3u);
}

TEST(RecoveryMachine, RepliesFromStagesNotAwaitedAreNotTheMachines) {
  RecoveryMachine m = Machine(3, 1);
  Actions out;
  EXPECT_FALSE(m.OnMessage(1, AckOf(1), kT0, &out)) << "healthy: nothing is awaited";
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  EXPECT_FALSE(m.OnMessage(0, GoodHello(), kT0, &out));
  EXPECT_FALSE(m.OnMessage(0, AckOf(0), kT0, &out));
  EXPECT_FALSE(m.OnMessage(2, Refusal("not mine"), kT0, &out));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(m.state(), State::kReassigning);
  EXPECT_EQ(m.awaiting(), (std::vector<size_t>{1}));

  // Nor are an awaited stage's messages that answer no Assign.
  wire::Message session_error = wire::ErrorReport{ErrorKind::kInvalid, "step", true, 7};
  EXPECT_FALSE(m.OnMessage(1, session_error, kT0, &out));
  EXPECT_FALSE(m.OnMessage(1, wire::Heartbeat{1, "w"}, kT0, &out));
  EXPECT_TRUE(out.empty());

  // While rewiring, the rebuilt stage is no longer awaited either.
  Acknowledge(m, 1);
  EXPECT_FALSE(m.OnMessage(1, AckOf(1), kT0, &out));
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(m.awaiting(), (std::vector<size_t>{0, 2}));
}

TEST(RecoveryMachine, AnAckForAnotherStageIsAnotherWorkersAndIsRefused) {
  RecoveryMachine m = Machine(3, 2);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  EXPECT_TRUE(m.OnMessage(1, GoodHello(), kT0, &out));
  EXPECT_TRUE(m.OnMessage(1, AckOf(2), kT0, &out));
  const Actions logs = Only(out, Kind::kLog);
  ASSERT_FALSE(logs.empty());
  EXPECT_NE(logs[0].text.find("acknowledged a different assignment"), std::string::npos)
      << logs[0].text;
  ASSERT_EQ(Only(out, Kind::kAssignSpare).size(), 1u);
  EXPECT_EQ(m.endpoint(1), Spare(1));
  EXPECT_EQ(m.state(), State::kReassigning);

  // Same index, other layers: refused too; no spare is left.
  out.clear();
  wire::AssignAck other_layers = AckOf(1);
  other_layers.layer_hi = 25;
  EXPECT_TRUE(m.OnMessage(1, GoodHello(), kT0, &out));
  EXPECT_TRUE(m.OnMessage(1, other_layers, kT0, &out));
  EXPECT_EQ(m.state(), State::kFailed);
}

TEST(RecoveryMachine, AHelloOfOtherArtifactsRefusesTheSpare) {
  RecoveryMachine m = Machine(3, 2);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  wire::Hello other = GoodHello();
  other.weights_sha256.fill(9);
  EXPECT_TRUE(m.OnMessage(1, other, kT0, &out));
  const Actions logs = Only(out, Kind::kLog);
  ASSERT_FALSE(logs.empty());
  EXPECT_NE(logs[0].text.find("Mismatch"), std::string::npos) << logs[0].text;
  std::string nines;
  for (int i = 0; i < 32; ++i) nines += "09";
  EXPECT_NE(logs[0].text.find("worker " + Spare(0) + " (stage 1, layers [10,20)) refused: its "
                              "weights_sha256 is " + nines),
            std::string::npos)
      << logs[0].text;
  EXPECT_EQ(m.endpoint(1), Spare(1));

  // A rewired neighbour whose Hello names other artifacts fails the cluster.
  out.clear();
  Acknowledge(m, 1);
  wire::Hello old_protocol = GoodHello();
  old_protocol.protocol_version = wire::kProtocolVersion + 1;
  EXPECT_TRUE(m.OnMessage(2, old_protocol, kT0, &out));
  ASSERT_EQ(Only(out, Kind::kFail).size(), 1u);
  EXPECT_EQ(Only(out, Kind::kFail)[0].status.kind(), ErrorKind::kMismatch);
}

TEST(RecoveryMachine, ASpareNamingALiveStagesAddressIsSkipped) {
  std::vector<RecoveryMachine::Stage> stages;
  for (size_t k = 0; k < 3; ++k) {
    const int lo = static_cast<int>(10 * k);
    stages.push_back(RecoveryMachine::Stage{StageSpec{lo, lo + 10, k == 0, k == 2}, Worker(k), ""});
  }
  // The first spare is stage 2's worker; the second the dead worker's own
  // address (a worker restarted there takes its stage back).
  RecoveryMachine m(stages, {SpareWorker{Worker(2), ""}, SpareWorker{Worker(1), ""}}, Seed(),
                    kTimeout);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  const Actions assign = Only(out, Kind::kAssignSpare);
  ASSERT_EQ(assign.size(), 1u);
  EXPECT_EQ(assign[0].endpoint, Worker(1));
}

TEST(RecoveryMachine, AnAssignThatCannotBeSentIsAFailedWait) {
  RecoveryMachine m = Machine(3, 2);
  Actions out;
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  m.OnAssignNotSent(1, IoError("no route"), kT0, &out);
  ASSERT_EQ(Only(out, Kind::kAssignSpare).size(), 1u);
  EXPECT_EQ(m.endpoint(1), Spare(1));

  Acknowledge(m, 1);
  out.clear();
  m.OnAssignNotSent(2, DisconnectedError("worker tcp://w2 cannot take messages"), kT0, &out);
  ASSERT_EQ(Only(out, Kind::kFail).size(), 1u);
  EXPECT_NE(Only(out, Kind::kFail)[0].status.message().find("while re-wiring around"),
            std::string::npos);
  EXPECT_EQ(m.state(), State::kFailed);
}

TEST(RecoveryMachine, ARefusedLinkCountsOnlyWhileItsReplyIsAwaited) {
  RecoveryMachine m = Machine(3, 2);
  Actions out;
  m.OnLinkRefused(1, MismatchError("key"), kT0, &out);
  EXPECT_TRUE(out.empty()) << "healthy";
  m.OnDead(1, Dead(1), kT0, &out);
  out.clear();
  m.OnLinkRefused(0, MismatchError("stage 0's link"), kT0, &out);
  EXPECT_TRUE(out.empty()) << "stage 0 is not awaited";
  m.OnLinkRefused(1, MismatchError("the spare's key is not the pinned one"), kT0, &out);
  ASSERT_EQ(Only(out, Kind::kAssignSpare).size(), 1u);
  EXPECT_EQ(m.endpoint(1), Spare(1));
}

TEST(RecoveryMachine, WorkersShutDownOnPurposeAreNotRebuilt) {
  RecoveryMachine m = Machine(3, 2);
  m.OnWorkersShutDown();
  Actions out;
  m.OnDead(0, Dead(0), kT0, &out);
  ASSERT_EQ(KindsOf(out), (std::vector<Kind>{Kind::kMarkStage, Kind::kFail}));
  EXPECT_EQ(out[1].status.message(), Dead(0).message());
}

}  // namespace
}  // namespace lockstep
