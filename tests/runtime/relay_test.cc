// Relayed steps (docs/runtime.md, "Relayed steps"): after the prompt, the
// last stage hands each chosen token straight to the first stage, so the
// coordinator sends one TokenInput per run of steps no eviction breaks,
// not one per token. Every plan, greedy or sampled, with windows and
// evictions, equals the monolithic decode bit for bit; a caller that leaves
// the chain it promised (another token, an eviction, a fork) gets exactly
// the bits the same calls give monolithically. A last stage whose relayed
// steps are malformed fails only its session, with the cause named.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <functional>

#include "engine/local_backend.h"
#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"
#include "wire/messages.h"

namespace lockstep::testing {
namespace {

class Relay : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("relay", 4, 23)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }

  static DecodeRequest Req(bool sampled, bool evicting) {
    DecodeRequest r;
    r.prompt = {11, 7, 300, 2, 45, 9};
    r.gen = 14;
    if (sampled) r.sampling = SamplingParams{0.8f, 30, 0.9f, 20261202};
    if (evicting) r.evictions = {{1, 2, 0}, {0, 1, 5}, {2, 3, 9}};
    return r;
  }
  // Heartbeats every minute: during a test, only session traffic is sent.
  static ClusterConfig Quiet(const InProcCluster& cluster, std::vector<LayerRange> plan) {
    return cluster.Config(*model_, std::move(plan), /*heartbeat_ms=*/60000);
  }

  static std::string* model_;
};
std::string* Relay::model_ = nullptr;

TEST_F(Relay, EveryPlanRelaysItsStepsAndEqualsMonolithic) {
  const std::vector<std::vector<LayerRange>> plans = {
      {{0, 4}}, {{0, 1}, {1, 4}}, {{0, 2}, {2, 3}, {3, 4}}};
  for (const auto& plan : plans) {
    for (const bool sampled : {false, true}) {
      for (const bool evicting : {false, true}) {
        SCOPED_TRACE(std::to_string(plan.size()) + " stages, sampled " + std::to_string(sampled) +
                     ", evicting " + std::to_string(evicting));
        const DecodeRequest req = Req(sampled, evicting);
        InProcCluster cluster(plan.size());
        auto c = Coordinator::Start(cluster.context(), Quiet(cluster, plan));
        ASSERT_TRUE(c.ok()) << c.status().ToString();
        auto s = (*c)->OpenSession(std::nullopt, req.sampling);
        ASSERT_TRUE(s.ok());
        const uint64_t before = (*c)->stats().frames_sent;
        auto got = RunDecode(**s, req, (*c)->seed());
        ASSERT_TRUE(got.ok()) << got.status().ToString();
        ExpectSameDecode(*got, Monolithic(*model_, req));
        // The SessionOpen (posted, sent by the decode's first loop turn),
        // one TokenInput for the prompt and, after each evicting step (0, 5
        // and 9), its Evict and the next step's TokenInput: nothing per token.
        const uint64_t sent = (*c)->stats().frames_sent - before;
        EXPECT_EQ(sent, evicting ? 2u + 3u + 3u : 2u);
      }
    }
  }
}

TEST_F(Relay, AWindowedDecodeRelaysAndEqualsMonolithic) {
  const DecodeRequest req = Req(true, true);
  InProcCluster cluster(2);
  auto c = Coordinator::Start(cluster.context(), Quiet(cluster, {{0, 3}, {3, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = (*c)->OpenSession(4, req.sampling);
  ASSERT_TRUE(s.ok());
  auto got = RunDecode(**s, req, (*c)->seed());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameDecode(*got, Monolithic(*model_, req, 4));
}

// One call on a backend, as a caller makes it by hand.
struct Call {
  enum class Kind { kChain, kStep, kEvict } kind = Kind::kStep;
  uint32_t a = 0;  // kChain: steps promised; kStep: token (0: the last outcome's); kEvict: from
  uint32_t b = 0;  // kEvict: count
};

// What a run of calls gave: every step's outcome and the final chain.
struct Trail {
  std::vector<StepOutcome> outcomes;
  Digest cis2_ref{};
};

Result<Trail> Drive(StepBackend& backend, const WitnessSeed& seed,
                    const std::vector<uint32_t>& prompt, const std::vector<Call>& calls) {
  WitnessChain chain(seed, prompt);
  std::vector<float> logits;
  SamplingScratch scratch;
  StepContext ctx{0, SamplingParams{}, &chain, &scratch, &logits};
  Trail t;
  for (const Call& c : calls) {
    if (c.kind == Call::Kind::kChain) {
      backend.ExpectChainedSteps(c.a);
    } else if (c.kind == Call::Kind::kEvict) {
      LOCKSTEP_RETURN_IF_ERROR(backend.Evict(c.a, c.b));
    } else {
      const uint32_t token[1] = {c.a != 0 ? c.a : t.outcomes.empty() ? 0 : t.outcomes.back().token};
      const std::span<const uint32_t> fed =
          t.outcomes.empty() ? std::span<const uint32_t>(prompt) : std::span<const uint32_t>(token);
      ctx.step = static_cast<uint32_t>(t.outcomes.size());
      LOCKSTEP_ASSIGN_OR_RETURN(StepOutcome o, backend.FeedAndChoose(fed, ctx));
      t.outcomes.push_back(o);
    }
  }
  t.cis2_ref = chain.Finalize();
  return t;
}

void ExpectSameTrail(const Trail& got, const Trail& want) {
  ASSERT_EQ(got.outcomes.size(), want.outcomes.size());
  for (size_t i = 0; i < got.outcomes.size(); ++i) {
    EXPECT_EQ(got.outcomes[i].token, want.outcomes[i].token) << "step " << i;
    EXPECT_EQ(ToHex(got.outcomes[i].logits_sha256), ToHex(want.outcomes[i].logits_sha256))
        << "step " << i;
  }
  EXPECT_EQ(ToHex(got.cis2_ref), ToHex(want.cis2_ref));
}

TEST_F(Relay, ACallerThatLeavesTheChainGetsTheBitsOfTheSameCallsMonolithically) {
  using K = Call::Kind;
  const std::vector<uint32_t> prompt = {3, 1, 4, 1, 5};
  const std::vector<std::vector<Call>> scripts = {
      // A promise of 8, broken at step 3 by another token.
      {{K::kChain, 8}, {}, {}, {}, {K::kStep, 42}, {}, {}},
      // Broken by an eviction after step 2, then a new promise kept.
      {{K::kChain, 10}, {}, {}, {}, {K::kEvict, 1, 3}, {K::kChain, 2}, {}, {}, {}},
      // A promise of 0, then an over-promise the caller never uses.
      {{K::kChain, 0}, {}, {}, {K::kChain, 30}, {}, {K::kEvict, 0, 1}},
  };
  Result<OpenModel> model = OpenModelDir(*model_, ModelPins{});
  ASSERT_TRUE(model.ok());
  auto stage = LoadStage(*model, {0, 4, true, true}, ComputeOptions{});
  ASSERT_TRUE(stage.ok());
  InProcCluster cluster(3);
  auto c = Coordinator::Start(cluster.context(), Quiet(cluster, {{0, 1}, {1, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (size_t i = 0; i < scripts.size(); ++i) {
    SCOPED_TRACE("script " + std::to_string(i));
    LocalBackend local(**stage);
    auto want = Drive(local, (*c)->seed(), prompt, scripts[i]);
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto s = (*c)->OpenSession(std::nullopt);
    ASSERT_TRUE(s.ok());
    auto got = Drive(**s, (*c)->seed(), prompt, scripts[i]);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ExpectSameTrail(*got, *want);
    // What follows sees the cache the calls left: one more feed agrees.
    EXPECT_EQ((*s)->CacheLength(), local.CacheLength());
    std::vector<float> expect, next;
    ASSERT_TRUE(local.Feed(std::vector<uint32_t>{17}, &expect).ok());
    ASSERT_TRUE((*s)->Feed(std::vector<uint32_t>{17}, &next).ok());
    ASSERT_EQ(expect.size(), next.size());
    EXPECT_EQ(0, std::memcmp(expect.data(), next.data(), expect.size() * 4));
  }
}

TEST_F(Relay, AForkInTheMiddleOfARelayHoldsWhatWasTakenAndNoMore) {
  const std::vector<uint32_t> prompt = {8, 6, 7, 5, 3, 0, 9};
  InProcCluster cluster(2);
  auto c = Coordinator::Start(cluster.context(), Quiet(cluster, {{0, 2}, {2, 4}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto s = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(s.ok());
  using K = Call::Kind;
  // Three steps of a promised twelve, then a fork of what they left.
  auto taken = Drive(**s, (*c)->seed(), prompt, {{K::kChain, 12}, {}, {}, {}});
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  auto fork = (*s)->Fork();
  ASSERT_TRUE(fork.ok()) << fork.status().ToString();
  EXPECT_EQ((*fork)->CacheLength(), prompt.size() + 2);
  EXPECT_EQ((*s)->CacheLength(), prompt.size() + 2);
  // Both continue with the same next token: equal logits, equal to a
  // monolithic cache fed the same tokens.
  Result<OpenModel> model = OpenModelDir(*model_, ModelPins{});
  ASSERT_TRUE(model.ok());
  auto stage = LoadStage(*model, {0, 4, true, true}, ComputeOptions{});
  ASSERT_TRUE(stage.ok());
  LocalBackend local(**stage);
  std::vector<float> ignored, want, from_fork, from_source;
  ASSERT_TRUE(local.Feed(prompt, &ignored).ok());
  for (size_t i = 0; i + 1 < taken->outcomes.size(); ++i) {
    ASSERT_TRUE(local.Feed(std::vector<uint32_t>{taken->outcomes[i].token}, &ignored).ok());
  }
  const std::vector<uint32_t> next = {taken->outcomes.back().token};
  ASSERT_TRUE(local.Feed(next, &want).ok());
  ASSERT_TRUE((*fork)->Feed(next, &from_fork).ok());
  ASSERT_TRUE((*s)->Feed(next, &from_source).ok());
  ASSERT_EQ(want.size(), from_fork.size());
  EXPECT_EQ(0, std::memcmp(want.data(), from_fork.data(), want.size() * 4));
  EXPECT_EQ(0, std::memcmp(want.data(), from_source.data(), want.size() * 4));
}

// The last worker's relayed steps to the first pass through `mutate`, once
// a decode has shown the first stage which connection its last stage is
// (inproc links carry no key: a keyless peer is bound to its role by what
// it sends first, and before that it is a stranger, refused to itself).
class HostileRelay : public Relay {
 protected:
  void Run(const std::function<void(wire::TokenInput&)>& mutate, const char* expect) {
    std::atomic<bool> armed{false};
    InProcCluster cluster(3, [&](size_t i, WorkerOptions& o) {
      if (i != 2) return;
      o.next_hop_transport.mutate_outgoing_for_testing = [&](std::vector<uint8_t>& f) {
        Result<wire::Message> m = wire::ParseMessage(f);
        auto* t = m.ok() ? std::get_if<wire::TokenInput>(&*m) : nullptr;
        if (!armed.load() || t == nullptr) return;
        mutate(*t);
        f = wire::MarshalMessage(*t);
      };
    });
    auto c = Coordinator::Start(cluster.context(), Quiet(cluster, {{0, 1}, {1, 3}, {3, 4}}));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    const DecodeRequest req = Req(false, false);
    {
      auto warm = (*c)->OpenSession(std::nullopt);
      ASSERT_TRUE(warm.ok());
      ASSERT_TRUE(RunDecode(**warm, req, (*c)->seed()).ok());
    }
    armed = true;
    auto victim = (*c)->OpenSession(std::nullopt);
    ASSERT_TRUE(victim.ok());
    auto bad = RunDecode(**victim, req, (*c)->seed());
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find(expect), std::string::npos) << bad.status().message();
    // Only that session failed: the next one decodes as monolithic does.
    armed = false;
    auto s = (*c)->OpenSession(std::nullopt, Req(true, true).sampling);
    ASSERT_TRUE(s.ok());
    auto good = RunDecode(**s, Req(true, true), (*c)->seed());
    ASSERT_TRUE(good.ok()) << good.status().ToString();
    ExpectSameDecode(*good, Monolithic(*model_, Req(true, true)));
    EXPECT_TRUE((*c)->health().ok());
  }
};

TEST_F(HostileRelay, AStepNotMarkedRelayedIsRefused) {
  Run([](wire::TokenInput& t) { t.relayed = false; }, "it sends the first stage only relayed steps");
}

TEST_F(HostileRelay, AStepOutOfTurnFailsItsSession) {
  Run([](wire::TokenInput& t) { t.step += 3; }, "but the session expects step");
}

TEST_F(HostileRelay, AStepPromisingMoreThanItWasGivenFailsItsSession) {
  Run([](wire::TokenInput& t) { t.handoff->relay += 5; }, "to follow, but the session expects");
}

TEST_F(HostileRelay, AStepAtAnotherPositionFailsItsSession) {
  Run([](wire::TokenInput& t) { t.first_position -= 1; }, "does not follow this stage's cache");
}

}  // namespace
}  // namespace lockstep::testing
