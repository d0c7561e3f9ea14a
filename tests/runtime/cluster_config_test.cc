// Cluster config parsing, plan syntax and plan validation (the automatic
// plan: plan_bytes_test.cc).
#include <gtest/gtest.h>

#include <filesystem>

#include "coordinator/cluster_config.h"
#include "keys/identity.h"
#include "cli_runner.h"
#include "engine/io/synthetic_model.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

TEST(ClusterConfig, ParsesEveryKey) {
  auto c = ParseClusterConfig(R"({"model": "/m", "workers": ["tcp://a:1", "tcp://b:2"],
      "plan": [[0, 3], [3, 4]], "plan_balance": "memory+work", "heartbeat_ms": 100, "liveness": 4,
      "request_timeout_ms": 5000, "insecure": true,
      "pins": {"config_sha256": "4c37f4e0a62adf3e8ef5eb2f1ab73c495cd522241ebe2290e0e313cfe2eb7e9e"}})",
                              "c.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_dir, "/m");
  EXPECT_EQ(c->workers.size(), 2u);
  EXPECT_FALSE(c->auto_plan);
  EXPECT_EQ(c->plan, (std::vector<LayerRange>{{0, 3}, {3, 4}}));
  EXPECT_EQ(c->plan_balance, PlanBalance::kMemoryAndWork);
  EXPECT_EQ(c->heartbeat.count(), 100);
  EXPECT_EQ(c->liveness, 4);
  EXPECT_EQ(c->request_timeout.count(), 5000);
  EXPECT_TRUE(c->pins.config.has_value());
  EXPECT_FALSE(c->pins.weights.has_value());
}

TEST(ClusterConfig, DefaultsAndAutoPlan) {
  auto c = ParseClusterConfig(R"({"model": "/m", "workers": ["inproc://a"], "plan": "auto"})", "c");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->insecure);
  EXPECT_TRUE(c->auto_plan);
  EXPECT_EQ(c->heartbeat.count(), 250);
  EXPECT_EQ(c->liveness, 8);
  EXPECT_EQ(c->request_timeout.count(), 30000);
  EXPECT_EQ(c->plan_balance, PlanBalance::kMemory);
  auto bad = ParseClusterConfig(R"({"model": "/m", "workers": ["inproc://a"], "plan_balance": "time"})", "c");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("\"plan_balance\""), std::string::npos) << bad.status().message();
}

TEST(ClusterConfig, ReadsKeyFilesRelativeToTheConfig) {
  const std::string dir = MakeTempDir("cluster-keys");
  std::vector<keys::Identity> ids;
  for (const char* name : {"coordinator", "w0", "w1"}) {
    ids.push_back(keys::GenerateIdentity().value());
    ASSERT_TRUE(keys::WriteIdentity(ids.back(), dir + "/" + name).ok());
  }
  const std::string json = R"({"model": "/m", "workers": ["tcp://a:1", "tcp://b:2"],
      "key": "coordinator", "worker_keys": ["w0.pub", "w1.pub"]})";
  auto c = ParseClusterConfig(json, "c.json", dir);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->insecure);
  EXPECT_EQ(c->key.public_z85, ids[0].pub.curve_public_z85);
  EXPECT_EQ(c->key.secret_z85, ids[0].curve_secret_z85);
  EXPECT_EQ(c->worker_keys,
            (std::vector<std::string>{ids[1].pub.curve_public_z85, ids[2].pub.curve_public_z85}));

  auto short_list = ParseClusterConfig(R"({"model": "/m", "workers": ["tcp://a:1", "tcp://b:2"],
      "key": "coordinator", "worker_keys": ["w0.pub"]})", "c.json", dir);
  ASSERT_FALSE(short_list.ok());
  EXPECT_NE(short_list.status().message().find("one public key file per worker"), std::string::npos)
      << short_list.status().message();
  auto both = ParseClusterConfig(R"({"model": "/m", "workers": ["tcp://a:1"], "insecure": true,
      "key": "coordinator", "worker_keys": ["w0.pub"]})", "c.json", dir);
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.status().message().find("choose one"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(ClusterConfig, RejectsBadInputNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"model": "/m", "workers": ["inproc://x"], "extra": 1})", "\"extra\""},
      {R"({"workers": ["inproc://x"]})", "\"model\""},
      {R"({"model": "/m"})", "\"workers\""},
      {R"({"model": "/m", "workers": []})", "\"workers\""},
      {R"({"model": "/m", "workers": [3]})", "\"workers\""},
      {R"({"model": "/m", "workers": ["inproc://x"], "plan": [[0]]})", "\"plan\""},
      {R"({"model": "/m", "workers": ["inproc://x"], "plan": "balanced"})", "\"plan\""},
      {R"({"model": "/m", "workers": ["inproc://x"], "heartbeat_ms": 0})", "\"heartbeat_ms\""},
      {R"({"model": "/m", "workers": ["inproc://x"], "liveness": -1})", "\"liveness\""},
      {R"({"model": "/m", "workers": ["inproc://x"], "pins": {"weights_sha256": "zz"}})", "weights_sha256"},
      {R"({"model": "/m", "workers": ["tcp://a:99999"], "insecure": true})", "out of range"},
      {R"({"model": "/m", "workers": ["tcp://a:1"]})", "\"key\" is required"},
      {R"({"model": "/m", "workers": ["tcp://a:1"], "insecure": 1})", "\"insecure\""},
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

// A key given twice (the second would silently win) and hostile nesting
// are refused, naming the key or the depth.
TEST(ClusterConfig, RepeatedKeysAndDeepNestingAreRefused) {
  for (const char* text :
       {R"({"model": "/m", "workers": ["tcp://a:1"], "insecure": false, "insecure": true})",
        R"({"model": "/m", "workers": ["tcp://a:1"], "pins": {"config_sha256": "x", "config_sha256": "y"}})"}) {
    auto c = ParseClusterConfig(text, "c.json");
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().kind(), ErrorKind::kInvalid);
    EXPECT_NE(c.status().message().find("c.json: duplicate JSON key"), std::string::npos)
        << c.status().ToString();
  }
  EXPECT_NE(ParseClusterConfig(R"({"model": "/m", "insecure": 1, "insecure": 2})", "c.json")
                .status().message().find("\"insecure\""),
            std::string::npos);
  auto deep = ParseClusterConfig("{\"plan\": " + std::string(60000, '[') + std::string(60000, ']') + "}",
                                 "c.json");
  EXPECT_NE(deep.status().message().find("nested deeper than 64"), std::string::npos)
      << deep.status().ToString();
}

TEST(ClusterConfig, MissingKeyFileIsNamed) {
  auto c = ParseClusterConfig(R"({"model": "/m", "workers": ["tcp://a:1"], "key": "k"})",
                              "c.json", "/nonexistent");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("/nonexistent/k"), std::string::npos)
      << c.status().message();
  EXPECT_NE(c.status().message().find("\"key\""), std::string::npos) << c.status().message();
}

TEST(ClusterConfig, ShippedExampleConfigsParse) {
  // Next to keys/ made by lockstep keygen, as the examples expect.
  const std::string dir = MakeTempDir("shipped");
  std::filesystem::create_directory(dir + "/keys");
  for (const char* name : {"coordinator", "w0", "w1", "w2"}) {
    ASSERT_TRUE(keys::WriteIdentity(keys::GenerateIdentity().value(), dir + "/keys/" + name).ok());
  }
  for (const char* name : {"loopback-3.json", "example-cluster.json"}) {
    std::filesystem::copy_file(std::string(LOCKSTEP_SOURCE_DIR) + "/configs/" + name,
                               dir + "/" + name);
    auto c = LoadClusterConfig(dir + "/" + name);
    EXPECT_TRUE(c.ok()) << name << ": " << c.status().ToString();
    if (c.ok()) {
      EXPECT_EQ(c->worker_keys.size(), 3u) << name;
    }
  }
  std::filesystem::remove_all(dir);
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

TEST(Plan, AutoRefusesMoreWorkersThanLayers) {
  ClusterConfig c;
  c.workers.assign(5, "inproc://x");
  ModelInfo m;
  m.config.num_layers = 4;
  auto r = ResolvePlan(c, m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kInvalid);
}

}  // namespace
}  // namespace lockstep::testing
