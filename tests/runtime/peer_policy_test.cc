// PeerPolicy's rules on their own: who holds a worker, when another
// coordinator may take it, and which connection may send what, with keys
// and without. The hostile tests (HostilePeers, InsecurePeers,
// ManyCoordinators) show the same rules on real workers.
#include "worker/peer_policy.h"

#include <gtest/gtest.h>

namespace lockstep {
namespace {

using namespace std::chrono_literals;
using Clock = PeerPolicy::Clock;

const PeerId kHolder{"coordinator-a", "HOLDERKEY"};
const PeerId kSameKey{"coordinator-b", "HOLDERKEY"};  // the same config, run again
const PeerId kOther{"coordinator-c", "OTHERKEY"};
const PeerId kUpstreamKeyed{"stage-of-w0-1", "W0KEY"};
const PeerId kRingKeyed{"ring-of-w2-1", "W2KEY"};

wire::Assign Stage(bool first, bool last) {
  wire::Assign a;
  a.layer_lo = 0;
  a.layer_hi = 1;
  a.is_first = first;
  a.is_last = last;
  if (!first) a.upstream_key = "W0KEY";
  if (first && !last) a.ring_upstream_key = "W2KEY";
  return a;
}

wire::Assign Keyless(wire::Assign a) {
  a.upstream_key.clear();
  a.ring_upstream_key.clear();
  return a;
}

wire::TokenInput Step(bool relayed) {
  wire::TokenInput t;
  t.session_id = 1;
  t.token_ids = {1};
  t.relayed = relayed;
  return t;
}

TEST(PeerPolicy, AnotherConnectionCannotTakeALiveHoldersWorkerWhateverItsKey) {
  PeerPolicy p(60000ms);
  const auto t0 = Clock::now();
  EXPECT_TRUE(p.AdmitAssign(kHolder, false, t0).ok());
  EXPECT_FALSE(p.Assigned(kHolder, Stage(true, false), t0));
  const auto t1 = t0 + 12s;
  p.Heard(t1 - 40ms);
  for (const PeerId& second : {kSameKey, kOther}) {
    EXPECT_TRUE(p.MustProbeHolder(second, t1)) << second.id;
    const Status st = p.AdmitAssign(second, /*holder_connected=*/true, t1);
    EXPECT_EQ(st.kind(), ErrorKind::kOverloaded) << st.ToString();
    EXPECT_NE(st.message().find("held by another coordinator"), std::string::npos);
    EXPECT_NE(st.message().find("since 12.0 s ago"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find("last spoke 40 ms ago"), std::string::npos) << st.message();
  }
  // The holder itself may assign again (a recovery re-wires it in place).
  EXPECT_FALSE(p.MustProbeHolder(kHolder, t1));
  EXPECT_TRUE(p.AdmitAssign(kHolder, true, t1).ok());
  EXPECT_FALSE(p.Assigned(kHolder, Stage(true, false), t1));
  EXPECT_EQ(p.holder_id(), kHolder.id);
}

TEST(PeerPolicy, AHolderWhoseConnectionClosedOrThatFellSilentIsGone) {
  PeerPolicy p(1000ms);
  const auto t0 = Clock::now();
  p.Assigned(kHolder, Stage(true, true), t0);
  // Its connection closed: a coordinator restarted with its key takes over.
  EXPECT_TRUE(p.AdmitAssign(kSameKey, /*holder_connected=*/false, t0 + 5ms).ok());
  // Silent for orphan_after: gone even if its connection looks up.
  EXPECT_FALSE(p.TakeOrphaned(t0 + 999ms));
  EXPECT_TRUE(p.TakeOrphaned(t0 + 1000ms));
  EXPECT_FALSE(p.TakeOrphaned(t0 + 2000ms));  // once
  EXPECT_FALSE(p.MustProbeHolder(kOther, t0 + 1000ms));
  EXPECT_TRUE(p.AdmitAssign(kOther, true, t0 + 1000ms).ok());
  EXPECT_TRUE(p.Assigned(kOther, Stage(true, true), t0 + 1001ms));  // took it: sessions go
  EXPECT_EQ(p.holder_id(), kOther.id);
  EXPECT_EQ(p.RoleOf(kHolder, nullptr), PeerRole::kStranger);
}

TEST(PeerPolicy, WithKeysRolesAreTheKeysTheHoldersAssignNamed) {
  PeerPolicy later(60000ms);
  later.Assigned(kHolder, Stage(false, true), Clock::now());
  const wire::Message release = wire::Release{1};
  EXPECT_EQ(later.RoleOf(kHolder, &release), PeerRole::kHolder);
  EXPECT_EQ(later.RoleOf(kSameKey, &release), PeerRole::kStranger);  // same key, other connection
  EXPECT_EQ(later.RoleOf(kUpstreamKeyed, &release), PeerRole::kUpstream);
  EXPECT_EQ(later.RoleOf(PeerId{"any-connection", "W0KEY"}, &release), PeerRole::kUpstream);
  EXPECT_EQ(later.RoleOf(kOther, &release), PeerRole::kStranger);
  PeerPolicy first(60000ms);
  first.Assigned(kHolder, Stage(true, false), Clock::now());
  const wire::Message relayed = Step(true);
  EXPECT_EQ(first.RoleOf(kRingKeyed, &relayed), PeerRole::kRing);
  EXPECT_EQ(first.RoleOf(kUpstreamKeyed, &relayed), PeerRole::kStranger);
}

TEST(PeerPolicy, WithoutKeysTheFirstConnectionToSpeakForARoleIsBoundToIt) {
  const PeerId holder{"coordinator-a", ""}, upstream{"stage-of-w0-1", ""},
      stranger{"stranger-1", ""};
  PeerPolicy p(60000ms);
  p.Assigned(holder, Keyless(Stage(false, true)), Clock::now());
  const wire::Message release = wire::Release{1}, step = Step(false);
  // A token input is no upstream's: a keyless peer sending one binds nothing.
  EXPECT_EQ(p.RoleOf(stranger, &step), PeerRole::kStranger);
  EXPECT_EQ(p.RoleOf(upstream, nullptr), PeerRole::kStranger);  // nothing bound yet
  EXPECT_EQ(p.RoleOf(upstream, &release), PeerRole::kUpstream);
  p.Admitted(upstream, PeerRole::kUpstream);
  EXPECT_EQ(p.RoleOf(upstream, nullptr), PeerRole::kUpstream);
  EXPECT_EQ(p.RoleOf(stranger, &release), PeerRole::kStranger);
  // The next Assign (a recovery's re-wiring) binds the upstream afresh.
  p.Assigned(holder, Keyless(Stage(false, true)), Clock::now());
  EXPECT_EQ(p.RoleOf(upstream, nullptr), PeerRole::kStranger);
  EXPECT_EQ(p.RoleOf(stranger, &release), PeerRole::kUpstream);

  PeerPolicy first(60000ms);
  first.Assigned(holder, Keyless(Stage(true, false)), Clock::now());
  const wire::Message relayed = Step(true);
  // The first stage has no upstream: session traffic from others is refused.
  EXPECT_EQ(first.RoleOf(upstream, &release), PeerRole::kStranger);
  EXPECT_EQ(first.RoleOf(upstream, &relayed), PeerRole::kRing);
  first.Admitted(upstream, PeerRole::kRing);
  EXPECT_EQ(first.RoleOf(stranger, &relayed), PeerRole::kStranger);
}

TEST(PeerPolicy, EachRoleMaySendOnlyItsOwnMessages) {
  PeerPolicy p(60000ms);
  p.Assigned(kHolder, Stage(false, true), Clock::now());
  const wire::HiddenFrame hidden{};
  struct Case {
    PeerRole role;
    wire::Message m;
    const char* refusal;  // null: admitted
  };
  const Case cases[] = {
      {PeerRole::kHolder, Step(false), nullptr},
      {PeerRole::kHolder, wire::Shutdown{"x"}, nullptr},
      {PeerRole::kHolder, wire::Release{1}, nullptr},
      {PeerRole::kHolder, Step(true), "only the last stage relays steps"},
      {PeerRole::kHolder, hidden, "only the upstream stage sends them"},
      {PeerRole::kUpstream, hidden, nullptr},
      {PeerRole::kUpstream, wire::Evict{1, 0, 1}, nullptr},
      {PeerRole::kUpstream, Step(false), "only the coordinator holding this worker sends token"},
      {PeerRole::kUpstream, wire::Shutdown{"x"}, "only the coordinator holding this worker may"},
      {PeerRole::kRing, Step(true), nullptr},
      {PeerRole::kRing, wire::Release{1}, "only relayed steps"},
      {PeerRole::kStranger, wire::Release{1}, "or its upstream stage may send it"},
      {PeerRole::kStranger, Step(true), "or its upstream stage may send it"},
  };
  for (const Case& c : cases) {
    const Status st = p.Admit(kOther, c.role, c.m);
    SCOPED_TRACE(std::string(wire::MessageName(c.m)) + " from role " +
                 std::to_string(static_cast<int>(c.role)));
    if (c.refusal == nullptr) {
      EXPECT_TRUE(st.ok()) << st.ToString();
    } else {
      EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
      EXPECT_NE(st.message().find(c.refusal), std::string::npos) << st.message();
    }
  }
}

}  // namespace
}  // namespace lockstep
