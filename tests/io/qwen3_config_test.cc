// Qwen3 and Qwen3-MoE config.json (EXTENSIONS.md E3, E4): the conformance
// configs read as the spec says, head_dim's Qwen3 default, and hostile
// values refused naming the field before anything is sized by them.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/io/model_config.h"
#include "tests/fixture_absent.h"
#include "tests/io/test_util.h"

namespace lockstep {
namespace {

using testing::SharedPath;

// A minimal valid Qwen3-MoE config; tests edit one field at a time.
nlohmann::json MoeBase() {
  return nlohmann::json::parse(R"({
    "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
    "hidden_act": "silu", "hidden_size": 64, "intermediate_size": 128,
    "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
    "vocab_size": 100, "max_position_embeddings": 256, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000, "head_dim": 32, "num_experts": 8,
    "num_experts_per_tok": 2, "moe_intermediate_size": 24, "norm_topk_prob": true,
    "decoder_sparse_step": 1, "mlp_only_layers": []})");
}

Result<ModelConfig> Parse(const nlohmann::json& j) { return ParseModelConfig(j.dump(), "cfg.json"); }

void ExpectError(const nlohmann::json& j, ErrorKind kind, const std::string& field) {
  auto c = Parse(j);
  ASSERT_FALSE(c.ok()) << j.dump();
  EXPECT_EQ(c.status().kind(), kind) << c.status().ToString();
  const std::string m = c.status().message();
  EXPECT_NE(m.find("cfg.json"), std::string::npos) << m;
  EXPECT_NE(m.find("\"" + field + "\""), std::string::npos) << m;
}

TEST(Qwen3ConfigTest, ConformanceConfigs) {
  const std::string dense = SharedPath("fixtures/conformance/tiny-qwen3/config.json");
  const std::string moe = SharedPath("fixtures/conformance/tiny-qwen3-moe/config.json");
  if (!testing::Exists(dense) || !testing::Exists(moe)) LOCKSTEP_FIXTURE_ABSENT();
  auto d = LoadModelConfig(dense);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_TRUE(d->qk_norm);
  EXPECT_FALSE(d->is_moe());
  EXPECT_EQ(d->head_dim, 32);  // explicit, not hidden/heads = 16
  EXPECT_EQ(d->intermediate_size, 128);
  auto m = LoadModelConfig(moe);
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_TRUE(m->qk_norm);
  ASSERT_TRUE(m->is_moe());
  EXPECT_EQ(m->head_dim, 16);
  EXPECT_EQ(m->moe.num_experts, 8);
  EXPECT_EQ(m->moe.experts_per_tok, 2);
  EXPECT_EQ(m->moe.intermediate_size, 32);
  EXPECT_TRUE(m->moe.norm_topk_prob);
}

TEST(Qwen3ConfigTest, Defaults) {
  nlohmann::json j = MoeBase();
  j.erase("head_dim");
  j.erase("norm_topk_prob");
  j.erase("decoder_sparse_step");
  j.erase("mlp_only_layers");
  j.erase("intermediate_size");  // unused by a MoE model
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->head_dim, 128);  // E3: HF's Qwen3 default, not 64 / 4
  EXPECT_FALSE(c->moe.norm_topk_prob);
  EXPECT_EQ(c->intermediate_size, 0);

  nlohmann::json dense = MoeBase();  // dense Qwen3: no MoE, q/k norm still
  dense["model_type"] = "qwen3";
  dense["architectures"] = {"Qwen3ForCausalLM"};
  dense.erase("head_dim");
  c = Parse(dense);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->qk_norm);
  EXPECT_FALSE(c->is_moe());
  EXPECT_EQ(c->head_dim, 128);

  dense.erase("model_type");  // the class gives the type
  c = Parse(dense);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "qwen3");
  EXPECT_TRUE(c->qk_norm);

  nlohmann::json llama = MoeBase();  // other families keep hidden/heads and ignore E4 keys
  llama["model_type"] = "llama";
  llama.erase("architectures");
  llama.erase("head_dim");
  c = Parse(llama);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->qk_norm);
  EXPECT_FALSE(c->is_moe());
  EXPECT_EQ(c->head_dim, 16);
}

TEST(Qwen3ConfigTest, HostileValuesNameTheField) {
  struct Case {
    const char* field;
    nlohmann::json value;
    ErrorKind kind = ErrorKind::kInvalid;
  };
  const Case cases[] = {
      {"num_experts", nullptr},
      {"num_experts", 0},
      {"num_experts", -8},
      {"num_experts", 1 << 20},
      {"num_experts", "8"},
      {"num_experts_per_tok", 9},  // k > E
      {"num_experts_per_tok", 0},
      {"num_experts_per_tok", nullptr},
      {"moe_intermediate_size", nullptr},
      {"moe_intermediate_size", 0},
      {"moe_intermediate_size", uint64_t{1} << 40},
      {"norm_topk_prob", 1},
      {"head_dim", 4096},
      {"head_dim", 31},
      {"decoder_sparse_step", 2, ErrorKind::kUnimplemented},
      {"decoder_sparse_step", 0},
      {"mlp_only_layers", {0, 2}, ErrorKind::kUnimplemented},
      {"mlp_only_layers", 3},
      {"architectures", {"Qwen3ForCausalLM"}},  // model_type says qwen3_moe
      {"architectures", "Qwen3MoeForCausalLM"},
      {"intermediate_size", 0},  // optional on MoE, but checked when given
  };
  for (const Case& c : cases) {
    nlohmann::json j = MoeBase();
    if (c.value.is_null()) j.erase(c.field);
    else j[c.field] = c.value;
    SCOPED_TRACE(std::string(c.field) + "=" + c.value.dump());
    ExpectError(j, c.kind, c.field);
  }
  nlohmann::json many = MoeBase();  // fine alone, too many expert tensors together
  many["num_experts"] = 1024;
  many["num_hidden_layers"] = 4000;
  ExpectError(many, ErrorKind::kInvalid, "num_experts");
  nlohmann::json mismatched = MoeBase();
  mismatched["model_type"] = "llama";
  ExpectError(mismatched, ErrorKind::kInvalid, "architectures");
}

}  // namespace
}  // namespace lockstep
