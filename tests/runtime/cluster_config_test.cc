// Cluster config parsing, plan syntax, plan validation and the auto plan.
#include <gtest/gtest.h>

#include "coordinator/cluster_config.h"
#include "engine/io/synthetic_model.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

TEST(ClusterConfig, ParsesEveryKey) {
  auto c = ParseClusterConfig(R"({"model": "/m", "workers": ["tcp://a:1", "tcp://b:2"],
      "plan": [[0, 3], [3, 4]], "heartbeat_ms": 100, "liveness": 4,
      "request_timeout_ms": 5000,
      "pins": {"config_sha256": "4c37f4e0a62adf3e8ef5eb2f1ab73c495cd522241ebe2290e0e313cfe2eb7e9e"}})",
                              "c.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_dir, "/m");
  EXPECT_EQ(c->workers.size(), 2u);
  EXPECT_FALSE(c->auto_plan);
  EXPECT_EQ(c->plan, (std::vector<LayerRange>{{0, 3}, {3, 4}}));
  EXPECT_EQ(c->heartbeat.count(), 100);
  EXPECT_EQ(c->liveness, 4);
  EXPECT_EQ(c->request_timeout.count(), 5000);
  EXPECT_TRUE(c->pins.config.has_value());
  EXPECT_FALSE(c->pins.weights.has_value());
}

TEST(ClusterConfig, DefaultsAndAutoPlan) {
  auto c = ParseClusterConfig(R"({"model": "/m", "workers": ["tcp://a:1"], "plan": "auto"})", "c");
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->auto_plan);
  EXPECT_EQ(c->heartbeat.count(), 250);
  EXPECT_EQ(c->liveness, 8);
  EXPECT_EQ(c->request_timeout.count(), 30000);
}

TEST(ClusterConfig, RejectsBadInputNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model": "/m", "workers": ["x"], "extra": 1})", "\"extra\""},
      {R"({"workers": ["x"]})", "\"model\""},
      {R"({"model": "/m"})", "\"workers\""},
      {R"({"model": "/m", "workers": []})", "\"workers\""},
      {R"({"model": "/m", "workers": [3]})", "\"workers\""},
      {R"({"model": "/m", "workers": ["x"], "plan": [[0]]})", "\"plan\""},
      {R"({"model": "/m", "workers": ["x"], "plan": "balanced"})", "\"plan\""},
      {R"({"model": "/m", "workers": ["x"], "heartbeat_ms": 0})", "\"heartbeat_ms\""},
      {R"({"model": "/m", "workers": ["x"], "liveness": -1})", "\"liveness\""},
      {R"({"model": "/m", "workers": ["x"], "pins": {"weights_sha256": "zz"}})", "weights_sha256"},
      {R"([1, 2])", "object"},
      {R"({"model": )", "JSON"},
  };
  for (const auto& [json, needle] : cases) {
    auto c = ParseClusterConfig(json, "bad.json");
    ASSERT_FALSE(c.ok()) << json;
    EXPECT_EQ(c.status().kind(), ErrorKind::kInvalid) << json;
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("bad.json"), std::string::npos) << c.status().message();
  }
}

TEST(ClusterConfig, ShippedExampleConfigsParse) {
  for (const char* name : {"loopback-3.json", "example-cluster.json"}) {
    auto c = LoadClusterConfig(std::string(LOCKSTEP_SOURCE_DIR) + "/configs/" + name);
    EXPECT_TRUE(c.ok()) << name << ": " << c.status().ToString();
  }
}

TEST(Plan, TextRoundTrip) {
  auto p = ParsePlanText("0:10,10:20,20:30");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(*p, (std::vector<LayerRange>{{0, 10}, {10, 20}, {20, 30}}));
  EXPECT_EQ(PlanText(*p), "0:10,10:20,20:30");
  for (const char* bad : {"", "0-10", "0:10,", ":3", "1:x", "0:10;10:20", "-1:2"}) {
    EXPECT_FALSE(ParsePlanText(bad).ok()) << bad;
  }
}

TEST(Plan, ValidationNamesTheProblem) {
  const std::pair<std::vector<LayerRange>, const char*> cases[] = {
      {{{0, 2}, {3, 4}}, "should start at layer 2"},   // gap
      {{{0, 2}, {1, 4}}, "should start at layer 2"},   // overlap
      {{{1, 4}, {4, 4}}, "should start at layer 0"},
      {{{0, 2}, {2, 2}}, "is empty"},
      {{{0, 2}, {2, 5}}, "runs past"},
      {{{0, 1}, {1, 3}}, "covers layers [0,3) of 4"},
  };
  for (const auto& [plan, needle] : cases) {
    Status st = ValidatePlan(plan, 4, plan.size());
    EXPECT_EQ(st.kind(), ErrorKind::kInvalid) << PlanText(plan);
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  }
  Status count = ValidatePlan({{0, 4}}, 4, 2);
  EXPECT_NE(count.message().find("one range per worker"), std::string::npos) << count.message();
  EXPECT_TRUE(ValidatePlan({{0, 1}, {1, 4}}, 4, 2).ok());
}

TEST(Plan, AutoIsValidForEveryWorkerCount) {
  ModelConfig cfg;
  cfg.num_layers = 30, cfg.hidden_size = 576, cfg.intermediate_size = 1536;
  cfg.num_heads = 9, cfg.num_kv_heads = 3, cfg.head_dim = 64, cfg.vocab_size = 49152;
  for (size_t n = 1; n <= 30; ++n) {
    const auto plan = AutoPlan(cfg, n);
    EXPECT_TRUE(ValidatePlan(plan, 30, n).ok()) << PlanText(plan);
  }
  // The embedding (first) and the LM head (last) cost about 4 and 8 layers,
  // so the first stage takes more layers than the last.
  const auto two = AutoPlan(cfg, 2);
  EXPECT_GT(two[0].hi - two[0].lo, two[1].hi - two[1].lo) << PlanText(two);
  const auto three = AutoPlan(cfg, 3);
  EXPECT_GT(three[1].hi - three[1].lo, three[2].hi - three[2].lo) << PlanText(three);
}

TEST(Plan, AutoRefusesMoreWorkersThanLayers) {
  ClusterConfig c;
  c.workers.assign(5, "inproc://x");
  ModelConfig m;
  m.num_layers = 4;
  auto r = ResolvePlan(c, m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep::testing
