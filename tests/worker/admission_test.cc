// The worker's admission checks on their own (worker/admission.h): an
// Assign's shape and links, and the request limits. HostilePeers and
// the worker tests in tests/runtime show them refusing on real workers.
#include "worker/admission.h"

#include <gtest/gtest.h>

namespace lockstep::admission {
namespace {

const std::string kSelf = "tcp://127.0.0.1:5601";

wire::Assign Middle() {
  wire::Assign a;
  a.layer_lo = 2;
  a.layer_hi = 4;
  a.worker_index = 1;
  a.next_hop = "tcp://127.0.0.1:5602";
  a.next_hop_key = "NEXTKEY";
  return a;
}

wire::Assign Last() {
  wire::Assign a = Middle();
  a.is_last = true;
  a.next_hop.clear();
  a.next_hop_key.clear();
  a.ring_hop = "tcp://127.0.0.1:5600";
  a.ring_hop_key = "FIRSTKEY";
  return a;
}

std::string Refusal(const wire::Assign& a, bool insecure = false) {
  return CheckAssign(a, kSelf, insecure).message();
}

TEST(Admission, AWellFormedAssignIsAdmitted) {
  EXPECT_TRUE(CheckAssign(Middle(), kSelf, false).ok());
  EXPECT_TRUE(CheckAssign(Last(), kSelf, false).ok());
}

TEST(Admission, AnAssignOfNoLayersOrWithTheWrongHopsIsRefused) {
  wire::Assign empty = Middle();
  empty.layer_hi = 2;
  EXPECT_EQ(Refusal(empty), "assignment refused: empty layer range [2,2)");
  wire::Assign last_with_hop = Last();
  last_with_hop.next_hop = "tcp://127.0.0.1:5602";
  EXPECT_EQ(Refusal(last_with_hop),
            "assignment refused: the last stage has no next hop and every other stage has one");
  wire::Assign ring_on_middle = Middle();
  ring_on_middle.ring_hop = "tcp://127.0.0.1:5600";
  EXPECT_EQ(Refusal(ring_on_middle),
            "assignment refused: only the last of two or more stages relays to the first (ring "
            "hop tcp://127.0.0.1:5600)");
}

TEST(Admission, AHopToThisWorkerItselfIsAForwardingLoop) {
  wire::Assign a = Middle();
  a.next_hop = "tcp://localhost:5601";  // this worker under another name
  EXPECT_EQ(Refusal(a),
            "assignment refused: its next hop tcp://localhost:5601 is this worker itself (a "
            "forwarding loop)");
  wire::Assign ring = Last();
  ring.ring_hop = kSelf;
  EXPECT_EQ(CheckAssign(ring, kSelf, false).kind(), ErrorKind::kInvalid);
}

TEST(Admission, ALinkNeedsAValidEndpointAndAKeyUnlessPlaintext) {
  wire::Assign keyless = Middle();
  keyless.next_hop_key.clear();
  EXPECT_EQ(Refusal(keyless),
            "assignment refused: next stage tcp://127.0.0.1:5602: the assignment names no CURVE "
            "key for the next stage");
  EXPECT_TRUE(CheckAssign(keyless, kSelf, /*insecure=*/true).ok());
  EXPECT_TRUE(CheckLink("inproc://stage-2", "", "next stage", false).ok()) << "inproc: no key";
  wire::Assign bad = Middle();
  bad.next_hop = "tcp://";
  EXPECT_EQ(CheckAssign(bad, kSelf, false).kind(), ErrorKind::kInvalid);
  wire::Assign ring = Last();
  ring.ring_hop_key.clear();
  EXPECT_NE(Refusal(ring).find("no CURVE key for the first stage"), std::string::npos)
      << Refusal(ring);
}

TEST(Admission, APromptOverTheLimitIsRefusedNamingItsStep) {
  Limits l;
  l.max_prompt_tokens = 3;
  wire::TokenInput t;
  t.session_id = 9;
  t.step = 2;
  t.token_ids = {1, 2, 3};
  EXPECT_TRUE(CheckLimits(t, l, 0, true).ok());
  t.token_ids.push_back(4);
  const Status st = CheckLimits(t, l, 0, true);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_EQ(st.message(),
            "limit max_prompt_tokens: session 9 step 2 asks for 4, over the limit of 3");
}

TEST(Admission, ANewSessionOverTheTighterSessionLimitIsOverloaded) {
  Limits l;
  l.sessions_per_worker = 4;
  l.sessions_per_coordinator = 2;
  const wire::SessionOpen open{};
  EXPECT_TRUE(CheckLimits(open, l, 1, false).ok());
  const Status st = CheckLimits(open, l, 2, false);
  EXPECT_EQ(st.kind(), ErrorKind::kOverloaded);
  EXPECT_EQ(st.message(),
            "limit sessions_per_coordinator: a new session asks for 3, over the limit of 2");
  EXPECT_TRUE(CheckLimits(open, l, 2, /*already_open=*/true).ok()) << "not a new one";
  const wire::Fork fork{};
  l.sessions_per_coordinator = 8;
  EXPECT_NE(CheckLimits(fork, l, 4, false).message().find("sessions_per_worker"),
            std::string::npos);
  EXPECT_TRUE(CheckLimits(wire::Release{}, l, 100, false).ok());
}

}  // namespace
}  // namespace lockstep::admission
