// Where a step's token is chosen: by default the last stage chooses it and
// folds the witness chain handed to it (no logits cross the network); with
// ship_logits the coordinator does. Both equal the monolithic decode bit
// for bit, greedy and sampled, with windows and evictions; the default
// moves under 1 KiB per step between coordinator and workers. A last stage
// that answers with junk fails only its session, with the cause named.
#include <gtest/gtest.h>

#include <atomic>

#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"
#include "wire/messages.h"

namespace lockstep::testing {
namespace {

constexpr uint32_t kVocab = 512;  // SyntheticShape's default

class PipelineChoice : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new std::string(MakeModel("choice", 4, 11)); }
  static void TearDownTestSuite() { delete model_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }

  static DecodeRequest Plain() {
    DecodeRequest r;
    r.prompt = {5, 9, 100, 17, 3};
    r.gen = 12;
    return r;
  }
  static DecodeRequest Sampled() {
    DecodeRequest r = Plain();
    r.sampling = SamplingParams{0.9f, 40, 0.95f, 20261130};
    return r;
  }
  static DecodeRequest SampledEvicting() {
    DecodeRequest r = Sampled();
    r.evictions = {{1, 2, 0}, {0, 1, 4}, {3, 2, 7}};
    return r;
  }
  static ClusterConfig Config(const InProcCluster& cluster, bool ship_logits) {
    ClusterConfig cfg = cluster.Config(*model_, {{0, 1}, {1, 3}, {3, 4}});
    cfg.ship_logits = ship_logits;
    return cfg;
  }

  static std::string* model_;
};
std::string* PipelineChoice::model_ = nullptr;

Result<DecodeResult> Sharded(Coordinator& c, const DecodeRequest& req,
                             std::optional<int> window = std::nullopt) {
  LOCKSTEP_ASSIGN_OR_RETURN(auto session, c.OpenSession(window, req.sampling));
  return RunDecode(*session, req, c.seed());
}

TEST_F(PipelineChoice, LastStageAndCoordinatorChoiceEqualMonolithic) {
  struct Case {
    const char* name;
    DecodeRequest req;
    std::optional<int> window;
  };
  const Case cases[] = {{"greedy", Plain(), std::nullopt},
                        {"sampled", Sampled(), std::nullopt},
                        {"sampled, window 4, evictions", SampledEvicting(), 4}};
  const DecodeResult greedy = Monolithic(*model_, Plain());
  const DecodeResult sampled = Monolithic(*model_, Sampled());
  EXPECT_NE(greedy.generated, sampled.generated);  // sampling really samples
  for (bool ship : {false, true}) {
    InProcCluster cluster(3);
    auto c = Coordinator::Start(cluster.context(), Config(cluster, ship));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(k.name) + (ship ? ", ship_logits" : ", default"));
      auto r = Sharded(**c, k.req, k.window);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      ExpectSameDecode(*r, Monolithic(*model_, k.req, k.window));
    }
  }
}

// Bytes between the coordinator and the workers per decode step.
double BytesPerStep(Coordinator& c, const DecodeRequest& req) {
  const WireStats before = c.stats();
  auto r = Sharded(c, req);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  const WireStats after = c.stats();
  return double(after.bytes_sent - before.bytes_sent + after.bytes_received -
                before.bytes_received) /
         req.gen;
}

TEST_F(PipelineChoice, DefaultMovesUnderAKilobytePerStep) {
  DecodeRequest req = Sampled();
  req.gen = 24;
  InProcCluster cluster(3);
  auto c = Coordinator::Start(cluster.context(), Config(cluster, false));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const double chosen_there = BytesPerStep(**c, req);
  EXPECT_LE(chosen_there, 1024.0);
  InProcCluster cluster2(3);
  auto shipping = Coordinator::Start(cluster2.context(), Config(cluster2, true));
  ASSERT_TRUE(shipping.ok()) << shipping.status().ToString();
  const double shipped = BytesPerStep(**shipping, req);
  EXPECT_GT(shipped, kVocab * 4.0);
  std::cout << "bytes per step: default " << chosen_there << ", ship_logits " << shipped << "\n";
}

TEST_F(PipelineChoice, StepsMustUseTheSessionsSampling) {
  InProcCluster cluster(3);
  auto c = Coordinator::Start(cluster.context(), Config(cluster, false));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto session = (*c)->OpenSession(std::nullopt);  // greedy
  ASSERT_TRUE(session.ok());
  auto r = RunDecode(**session, Sampled(), (*c)->seed());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kInvalid) << r.status().ToString();
  EXPECT_NE(r.status().message().find("sampling"), std::string::npos) << r.status().message();
  SamplingParams bad;
  bad.temperature = -1;
  EXPECT_EQ((*c)->OpenSession(std::nullopt, bad).status().kind(), ErrorKind::kInvalid);
}

TEST(PipelineChoiceConfig, ShipLogitsIsABooleanKey) {
  const char* base = R"({"model": "/m", "workers": ["inproc://a"], "plan": "auto")";
  auto off = ParseClusterConfig(std::string(base) + "}", "c.json");
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_FALSE(off->ship_logits);
  auto on = ParseClusterConfig(std::string(base) + R"(, "ship_logits": true})", "c.json");
  ASSERT_TRUE(on.ok()) << on.status().ToString();
  EXPECT_TRUE(on->ship_logits);
  auto bad = ParseClusterConfig(std::string(base) + R"(, "ship_logits": "yes"})", "c.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(bad.status().message().find("ship_logits"), std::string::npos)
      << bad.status().message();
}

// The last worker's answers to the coordinator pass through `mutate`.
class HostileLastStage : public PipelineChoice {
 protected:
  void Run(const std::function<void(std::vector<uint8_t>&)>& mutate, const char* expect,
           ErrorKind kind) {
    std::atomic<bool> armed{false};
    InProcCluster cluster(3, [&](size_t i, WorkerOptions& o) {
      if (i != 2) return;
      o.transport.mutate_outgoing_for_testing = [&](std::vector<uint8_t>& f) {
        Result<wire::Message> m = wire::ParseMessage(f);
        if (armed.load() && m.ok() && std::holds_alternative<wire::StepResult>(*m)) mutate(f);
      };
    });
    auto c = Coordinator::Start(cluster.context(), Config(cluster, false));
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    armed = true;
    auto bad = Sharded(**c, Plain());
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().kind(), kind) << bad.status().ToString();
    EXPECT_NE(bad.status().message().find(expect), std::string::npos) << bad.status().message();
    // Only that session failed: the next one decodes as monolithic does.
    armed = false;
    auto good = Sharded(**c, Sampled());
    ASSERT_TRUE(good.ok()) << good.status().ToString();
    ExpectSameDecode(*good, Monolithic(*model_, Sampled()));
  }
};

TEST_F(HostileLastStage, TokenOutsideTheVocabularyIsCorrupt) {
  Run(
      [](std::vector<uint8_t>& f) {
        auto r = std::get<wire::StepResult>(*wire::ParseMessage(f));
        r.token = kVocab;  // re-marshalled: a valid frame with a bad token
        f = wire::MarshalMessage(r);
      },
      "token 512", ErrorKind::kCorrupt);
}

TEST_F(HostileLastStage, FlippedChainStateIsCaughtByTheDigest) {
  Run([](std::vector<uint8_t>& f) { f[f.size() - 60] ^= 0x10; }, "step result digest mismatch",
      ErrorKind::kCorrupt);
}

TEST_F(HostileLastStage, JunkChainStateWithAValidDigestIsCorrupt) {
  Run(
      [](std::vector<uint8_t>& f) {
        auto r = std::get<wire::StepResult>(*wire::ParseMessage(f));
        r.chain_state.bytes[104] = 63;  // num disagrees with the length
        f = wire::MarshalMessage(r);    // the marshaller does not validate
      },
      "stepResult.chainState", ErrorKind::kCorrupt);
}

}  // namespace
}  // namespace lockstep::testing
