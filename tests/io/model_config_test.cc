#include "engine/io/model_config.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <bit>
#include <cstdint>

#include "tests/fixture_absent.h"
#include "tests/io/test_util.h"

namespace lockstep {
namespace {

using testing::SharedPath;

// A minimal valid Llama config; tests edit one field at a time.
nlohmann::json Base() {
  return nlohmann::json::parse(R"({
    "model_type": "llama", "hidden_act": "silu", "hidden_size": 64,
    "intermediate_size": 128, "num_hidden_layers": 4,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 100,
    "max_position_embeddings": 256, "rms_norm_eps": 1e-05,
    "rope_theta": 10000.0})");
}

Result<ModelConfig> Parse(const nlohmann::json& j) {
  return ParseModelConfig(j.dump(), "cfg.json");
}

// Expects `kind` and a message naming the file and `field`.
void ExpectError(const nlohmann::json& j, ErrorKind kind, const std::string& field) {
  auto c = Parse(j);
  ASSERT_FALSE(c.ok()) << j.dump();
  EXPECT_EQ(c.status().kind(), kind) << c.status().ToString();
  std::string m = c.status().message();
  EXPECT_NE(m.find("cfg.json"), std::string::npos) << m;
  EXPECT_NE(m.find(field), std::string::npos) << m;
}

TEST(ModelConfigTest, RealSmolLM2Config) {
  std::string path = SharedPath("fixtures/smollm2-135m/config.json");
  if (!testing::Exists(path)) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << path;
  auto c = LoadModelConfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "llama");
  EXPECT_EQ(c->hidden_size, 576);
  EXPECT_EQ(c->intermediate_size, 1536);
  EXPECT_EQ(c->num_layers, 30);
  EXPECT_EQ(c->num_heads, 9);
  EXPECT_EQ(c->num_kv_heads, 3);
  EXPECT_EQ(c->head_dim, 64);
  EXPECT_EQ(c->group(), 3);
  EXPECT_EQ(c->vocab_size, 49152);
  EXPECT_EQ(c->max_position_embeddings, 8192);
  EXPECT_EQ(std::bit_cast<uint32_t>(c->rms_norm_eps), 0x3727C5ACu);  // §2.3
  EXPECT_EQ(std::bit_cast<uint32_t>(c->rope_theta), 0x47C35000u);    // 100000.0f
  EXPECT_TRUE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->layer_window, std::vector<int>(30, 0));
  EXPECT_EQ(c->eos_token_ids, std::vector<uint32_t>{0});
}

TEST(ModelConfigTest, ConformanceConfigs) {
  struct Want { const char* model; int hidden, heads, kv, head_dim, vocab; uint32_t theta; bool tied; };
  for (const Want& w : {Want{"tiny-llama", 64, 4, 2, 16, 512, 0x47C35000u, true},
                        Want{"tiny-qwen", 64, 2, 1, 32, 600, 0x49742400u, false},
                        Want{"tiny-daz", 48, 3, 3, 16, 400, 0x47C35000u, true}}) {
    std::string path = SharedPath(std::string("fixtures/conformance/") + w.model + "/config.json");
    if (!testing::Exists(path)) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << path;
    auto c = LoadModelConfig(path);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ(c->hidden_size, w.hidden) << w.model;
    EXPECT_EQ(c->num_heads, w.heads) << w.model;
    EXPECT_EQ(c->num_kv_heads, w.kv) << w.model;
    EXPECT_EQ(c->head_dim, w.head_dim) << w.model;
    EXPECT_EQ(c->group(), w.heads / w.kv) << w.model;
    EXPECT_EQ(c->vocab_size, w.vocab) << w.model;
    EXPECT_EQ(std::bit_cast<uint32_t>(c->rope_theta), w.theta) << w.model;
    EXPECT_EQ(std::bit_cast<uint32_t>(c->rms_norm_eps), 0x3727C5ACu) << w.model;
    EXPECT_EQ(c->tie_word_embeddings, w.tied) << w.model;
    EXPECT_EQ(c->num_layers, 2) << w.model;
    EXPECT_EQ(c->layer_window, std::vector<int>(2, 0)) << w.model;
  }
}

TEST(ModelConfigTest, FloatCastIsOneRoundingFromDouble) {
  nlohmann::json j = Base();
  // 1e-6 as f64 -> f32 RNE (0x358637BD).
  j["rms_norm_eps"] = 1e-06;
  auto c = Parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(std::bit_cast<uint32_t>(c->rms_norm_eps), 0x358637BDu);
  j["rope_theta"] = 1000000;  // integer JSON is accepted
  c = Parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->rope_theta, 1000000.0f);
}

// eos_token_id is read with the rest of the config, once: an id or a list
// (Llama 3's three), absent or null for none; anything else is refused.
TEST(ModelConfigTest, EosTokenIdIsAnIdOrAList) {
  nlohmann::json j = Base();
  auto c = Parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(c->eos_token_ids.empty());
  j["eos_token_id"] = nullptr;
  EXPECT_TRUE(Parse(j)->eos_token_ids.empty());
  j["eos_token_id"] = 2;
  EXPECT_EQ(Parse(j)->eos_token_ids, std::vector<uint32_t>{2});
  j["eos_token_id"] = {128001, 128008, 128009};
  EXPECT_EQ(Parse(j)->eos_token_ids, (std::vector<uint32_t>{128001, 128008, 128009}));
  for (const nlohmann::json& bad : {nlohmann::json(-1), nlohmann::json("2"), nlohmann::json(2.5),
                                    nlohmann::json({1, "x"}), nlohmann::json(4294967296ull),
                                    nlohmann::json::object()}) {
    j["eos_token_id"] = bad;
    SCOPED_TRACE(bad.dump());
    ExpectError(j, ErrorKind::kInvalid, "eos_token_id");
  }
}

TEST(ModelConfigTest, DefaultsWhenOptionalKeysAbsent) {
  nlohmann::json j = Base();
  j.erase("num_key_value_heads");
  j.erase("hidden_act");
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->num_kv_heads, 4);
  EXPECT_EQ(c->group(), 1);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_FALSE(c->attention_bias);
  EXPECT_EQ(c->head_dim, 16);
  j["head_dim"] = 32;  // explicit head_dim wins over hidden/heads
  j["attention_bias"] = true;
  c = Parse(j);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_TRUE(c->attention_bias);
}

TEST(ModelConfigTest, SlidingWindowConventions) {
  nlohmann::json q = Base();  // Qwen2: layers >= max_window_layers slide
  q["use_sliding_window"] = true;
  q["sliding_window"] = 32;
  q["max_window_layers"] = 1;
  EXPECT_EQ(Parse(q)->layer_window, (std::vector<int>{0, 32, 32, 32}));
  q["use_sliding_window"] = false;
  EXPECT_EQ(Parse(q)->layer_window, (std::vector<int>{0, 0, 0, 0}));
  q["use_sliding_window"] = nullptr;
  EXPECT_EQ(Parse(q)->layer_window, (std::vector<int>{0, 0, 0, 0}));

  nlohmann::json m = Base();  // Mistral: every layer
  m["sliding_window"] = 8;
  EXPECT_EQ(Parse(m)->layer_window, (std::vector<int>{8, 8, 8, 8}));
  m["sliding_window"] = nullptr;
  EXPECT_EQ(Parse(m)->layer_window, (std::vector<int>{0, 0, 0, 0}));

  nlohmann::json t = Base();  // layer_types decides, overriding the rest
  t["use_sliding_window"] = false;
  t["sliding_window"] = 16;
  t["layer_types"] = {"sliding_attention", "full_attention", "sliding_attention",
                      "full_attention"};
  EXPECT_EQ(Parse(t)->layer_window, (std::vector<int>{16, 0, 16, 0}));
}

TEST(ModelConfigTest, SlidingWindowErrors) {
  nlohmann::json j = Base();
  j["use_sliding_window"] = true;
  j["sliding_window"] = 32;
  ExpectError(j, ErrorKind::kInvalid, "max_window_layers");
  j["max_window_layers"] = 0;
  j["sliding_window"] = 0;
  ExpectError(j, ErrorKind::kInvalid, "sliding_window");
  j["use_sliding_window"] = "yes";
  ExpectError(j, ErrorKind::kInvalid, "use_sliding_window");
  nlohmann::json t = Base();
  t["layer_types"] = {"full_attention"};
  ExpectError(t, ErrorKind::kInvalid, "layer_types");
  t["layer_types"] = {"full_attention", "sliding_attention", "full_attention",
                      "full_attention"};
  ExpectError(t, ErrorKind::kInvalid, "sliding_window");
  t["layer_types"] = {"full_attention", "chunked_attention", "full_attention",
                      "full_attention"};
  ExpectError(t, ErrorKind::kUnimplemented, "layer_types");
  nlohmann::json m = Base();
  m["sliding_window"] = -4;
  ExpectError(m, ErrorKind::kInvalid, "sliding_window");
}

TEST(ModelConfigTest, UnsupportedFeaturesAreUnimplemented) {
  nlohmann::json j = Base();
  j["hidden_act"] = "gelu";
  ExpectError(j, ErrorKind::kUnimplemented, "hidden_act");
  j = Base();
  j["rope_interleaved"] = true;
  ExpectError(j, ErrorKind::kUnimplemented, "rope_interleaved");
  j = Base();
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  ExpectError(j, ErrorKind::kUnimplemented, "rope_scaling");
  j["rope_scaling"] = nullptr;
  EXPECT_TRUE(Parse(j).ok());
}

TEST(ModelConfigTest, BadFieldsAreInvalid) {
  struct Case { const char* field; nlohmann::json value; };
  const Case cases[] = {
      {"hidden_size", nullptr},        {"hidden_size", 0},
      {"hidden_size", -64},            {"hidden_size", 64.5},
      {"hidden_size", "64"},           {"hidden_size", 4294967296ull},
      {"intermediate_size", nullptr},  {"num_hidden_layers", 0},
      {"num_attention_heads", 3},      // does not divide 64
      {"num_key_value_heads", 3},      // does not divide 4 heads
      {"num_key_value_heads", 0},      {"vocab_size", true},
      {"max_position_embeddings", nullptr},
      {"rms_norm_eps", nullptr},       {"rms_norm_eps", 0.0},
      {"rms_norm_eps", -1e-5},         {"rms_norm_eps", "1e-5"},
      {"rms_norm_eps", 1e-50},         // underflows to 0 as f32
      {"rope_theta", 1e300},           // overflows f32
      {"rope_theta", nullptr},         {"tie_word_embeddings", "true"},
      {"attention_bias", 1},           {"model_type", 7},
      {"head_dim", 15},                {"head_dim", 0},
  };
  for (const Case& c : cases) {
    nlohmann::json j = Base();
    if (c.value.is_null()) j.erase(c.field);
    else j[c.field] = c.value;
    SCOPED_TRACE(std::string(c.field) + "=" + c.value.dump());
    ExpectError(j, ErrorKind::kInvalid, c.field);
  }
}

TEST(ModelConfigTest, OddHeadDimFromDivisionIsInvalid) {
  nlohmann::json j = Base();
  j["hidden_size"] = 60;
  j["num_attention_heads"] = 4;  // head_dim 15
  j["num_key_value_heads"] = 4;
  ExpectError(j, ErrorKind::kInvalid, "head_dim");
}

TEST(ModelConfigTest, NotJsonOrNotObject) {
  auto c = ParseModelConfig("{\"hidden_size\": ", "cfg.json");
  EXPECT_EQ(c.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(c.status().message().find("cfg.json"), std::string::npos);
  EXPECT_EQ(ParseModelConfig("[1]", "cfg.json").status().kind(), ErrorKind::kInvalid);
  auto dup = ParseModelConfig(R"({"hidden_size": 64, "hidden_size": 32})", "cfg.json");
  EXPECT_EQ(dup.status().kind(), ErrorKind::kInvalid);
  EXPECT_NE(dup.status().message().find("hidden_size"), std::string::npos);
}

TEST(ModelConfigTest, MissingFileIsNotFound) {
  auto c = LoadModelConfig(testing::ScratchDir() + "/config.json");
  EXPECT_EQ(c.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(c.status().message().find("config.json"), std::string::npos);
}

}  // namespace
}  // namespace lockstep
