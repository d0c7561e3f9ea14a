#include "engine/io/synthetic_model.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "base/sha256.h"
#include "engine/io/safetensors.h"
#include "tests/fixture_absent.h"
#include "tests/io/test_util.h"

namespace lockstep {
namespace {

using testing::ScratchDir;
using testing::SharedPath;

std::string Hash(const std::string& path) { return ToHex(*Sha256File(path)); }

SafetensorsFile MustOpen(const std::string& path) {
  auto f = SafetensorsFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return std::move(f).value();
}

// Every tensor §2.5 (plus bias / lm_head) promises, with its shape.
std::vector<std::pair<std::string, std::vector<int64_t>>> Expected(
    const ModelConfig& c, bool bias) {
  const int64_t h = c.hidden_size, q = c.num_heads * c.head_dim,
                kv = c.num_kv_heads * c.head_dim, in = c.intermediate_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> e = {
      {"model.embed_tokens.weight", {c.vocab_size, h}}, {"model.norm.weight", {h}}};
  if (!c.tie_word_embeddings) e.push_back({"lm_head.weight", {c.vocab_size, h}});
  for (int i = 0; i < c.num_layers; ++i) {
    std::string p = "model.layers." + std::to_string(i) + ".";
    e.push_back({p + "input_layernorm.weight", {h}});
    e.push_back({p + "post_attention_layernorm.weight", {h}});
    e.push_back({p + "self_attn.q_proj.weight", {q, h}});
    e.push_back({p + "self_attn.k_proj.weight", {kv, h}});
    e.push_back({p + "self_attn.v_proj.weight", {kv, h}});
    e.push_back({p + "self_attn.o_proj.weight", {h, q}});
    if (c.qk_norm) {
      e.push_back({p + "self_attn.q_norm.weight", {c.head_dim}});
      e.push_back({p + "self_attn.k_norm.weight", {c.head_dim}});
    }
    if (c.is_moe()) {
      const int64_t mi = c.moe.intermediate_size;
      e.push_back({p + "mlp.gate.weight", {c.moe.num_experts, h}});
      for (int x = 0; x < c.moe.num_experts; ++x) {
        const std::string px = p + "mlp.experts." + std::to_string(x) + ".";
        e.push_back({px + "gate_proj.weight", {mi, h}});
        e.push_back({px + "up_proj.weight", {mi, h}});
        e.push_back({px + "down_proj.weight", {h, mi}});
      }
    } else {
      e.push_back({p + "mlp.gate_proj.weight", {in, h}});
      e.push_back({p + "mlp.up_proj.weight", {in, h}});
      e.push_back({p + "mlp.down_proj.weight", {h, in}});
    }
    if (bias) {
      e.push_back({p + "self_attn.q_proj.bias", {q}});
      e.push_back({p + "self_attn.k_proj.bias", {kv}});
      e.push_back({p + "self_attn.v_proj.bias", {kv}});
    }
  }
  return e;
}

void ExpectTensors(const std::string& dir, bool bias) {
  auto cfg = LoadModelConfig(dir + "/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  SafetensorsFile f = MustOpen(dir + "/model.safetensors");
  auto expected = Expected(*cfg, bias);
  EXPECT_EQ(f.tensors().size(), expected.size());
  for (const auto& [name, shape] : expected) {
    const TensorInfo* t = f.Find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->dtype, DType::kBF16) << name;
    EXPECT_EQ(t->shape, shape) << name;
  }
}

TEST(SyntheticModelTest, Bf16RoundNearestEven) {
  auto r = [](uint32_t bits) { return Bf16RoundNearestEven(std::bit_cast<float>(bits)); };
  EXPECT_EQ(r(0x3F800000), 0x3F80);  // 1.0 exact
  EXPECT_EQ(r(0x3F808000), 0x3F80);  // tie, even stays
  EXPECT_EQ(r(0x3F818000), 0x3F82);  // tie, odd rounds up
  EXPECT_EQ(r(0x3F808001), 0x3F81);  // above half
  EXPECT_EQ(r(0x3F807FFF), 0x3F80);  // below half
  EXPECT_EQ(r(0xBF818000), 0xBF82);  // sign symmetric
  EXPECT_EQ(r(0x80000000), 0x8000);  // -0
  EXPECT_EQ(r(0x7F7FFFFF), 0x7F80);  // max finite rounds to inf
  EXPECT_EQ(r(0x7F800000), 0x7F80);  // inf
  EXPECT_EQ(r(0x00008000), 0x0000);  // subnormal tie to even zero
  uint16_t nan = r(0x7F800001);      // NaN whose payload is in the low bits
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
}

TEST(SyntheticModelTest, ConfigJsonParsesBack) {
  SyntheticShape s;
  s.bias = true;
  s.untied = true;
  s.theta = 1e6;
  auto c = ParseModelConfig(SyntheticConfigJson(s), "synthetic");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "qwen2");
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->num_heads, 4);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->intermediate_size, 128);
  EXPECT_EQ(c->vocab_size, 512);
  EXPECT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(std::bit_cast<uint32_t>(c->rms_norm_eps), 0x3727C5ACu);
  EXPECT_TRUE(c->attention_bias);
  EXPECT_FALSE(c->tie_word_embeddings);
  EXPECT_EQ(SyntheticConfigJson(s).back(), '\n');
}

TEST(SyntheticModelTest, SmolLM2ShapeMatchesTheRealConfig) {
  std::string path = SharedPath("fixtures/smollm2-135m/config.json");
  if (!testing::Exists(path)) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << path;
  auto real = LoadModelConfig(path);
  auto syn = ParseModelConfig(SyntheticConfigJson(SmolLM2Shape()), "synthetic");
  ASSERT_TRUE(real.ok() && syn.ok());
  EXPECT_EQ(syn->model_type, real->model_type);
  EXPECT_EQ(syn->hidden_size, real->hidden_size);
  EXPECT_EQ(syn->intermediate_size, real->intermediate_size);
  EXPECT_EQ(syn->num_layers, real->num_layers);
  EXPECT_EQ(syn->num_heads, real->num_heads);
  EXPECT_EQ(syn->num_kv_heads, real->num_kv_heads);
  EXPECT_EQ(syn->head_dim, real->head_dim);
  EXPECT_EQ(syn->vocab_size, real->vocab_size);
  EXPECT_EQ(syn->max_position_embeddings, real->max_position_embeddings);
  EXPECT_EQ(std::bit_cast<uint32_t>(syn->rms_norm_eps), std::bit_cast<uint32_t>(real->rms_norm_eps));
  EXPECT_EQ(std::bit_cast<uint32_t>(syn->rope_theta), std::bit_cast<uint32_t>(real->rope_theta));
  EXPECT_EQ(syn->tie_word_embeddings, real->tie_word_embeddings);
  EXPECT_EQ(syn->attention_bias, real->attention_bias);
}

TEST(SyntheticModelTest, WritesEveryTensorWithItsShape) {
  std::string root = ScratchDir();
  SyntheticShape plain;
  ASSERT_TRUE(WriteSyntheticModel(root + "/plain", plain, 1, "").ok());
  ExpectTensors(root + "/plain", false);
  EXPECT_FALSE(testing::Exists(root + "/plain/tokenizer.json"));
  SyntheticShape qwen;
  qwen.bias = true;
  qwen.untied = true;
  qwen.layers = 3;
  ASSERT_TRUE(WriteSyntheticModel(root + "/qwen", qwen, 1, "").ok());
  ExpectTensors(root + "/qwen", true);
}

TEST(SyntheticModelTest, Qwen3AndMoeShapes) {
  std::string root = ScratchDir();
  SyntheticShape dense;
  dense.qwen3 = true;
  dense.head_dim = 24;  // not hidden / heads
  ASSERT_TRUE(WriteSyntheticModel(root + "/dense", dense, 1, "").ok());
  ExpectTensors(root + "/dense", false);
  SyntheticShape moe = dense;
  moe.experts = 5, moe.top_k = 2, moe.moe_inter = 40, moe.norm_topk = true, moe.untied = true;
  ASSERT_TRUE(WriteSyntheticModel(root + "/moe", moe, 1, "").ok());
  ExpectTensors(root + "/moe", false);
  auto c = LoadModelConfig(root + "/moe/config.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "qwen3_moe");
  EXPECT_EQ(c->head_dim, 24);
  EXPECT_EQ(c->moe.num_experts, 5);
  EXPECT_EQ(c->moe.experts_per_tok, 2);
  EXPECT_EQ(c->moe.intermediate_size, 40);
  EXPECT_TRUE(c->moe.norm_topk_prob);
  EXPECT_EQ(std::bit_cast<uint32_t>(c->rms_norm_eps), 0x358637BDu);  // 1e-6, as Qwen3's
}

TEST(SyntheticModelTest, NamedQwen3ShapesAreThePublishedOnes) {
  auto small = ParseModelConfig(SyntheticConfigJson(Qwen3_0_6BShape()), "qwen3-0.6b");
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->model_type, "qwen3");
  EXPECT_EQ(small->hidden_size, 1024);
  EXPECT_EQ(small->num_layers, 28);
  EXPECT_EQ(small->num_heads, 16);
  EXPECT_EQ(small->num_kv_heads, 8);
  EXPECT_EQ(small->head_dim, 128);
  EXPECT_EQ(small->intermediate_size, 3072);
  EXPECT_EQ(small->vocab_size, 151936);
  EXPECT_TRUE(small->tie_word_embeddings);
  auto moe = ParseModelConfig(SyntheticConfigJson(Qwen3_30B_A3BShape()), "qwen3-30b-a3b");
  ASSERT_TRUE(moe.ok()) << moe.status().ToString();
  EXPECT_EQ(moe->model_type, "qwen3_moe");
  EXPECT_EQ(moe->hidden_size, 2048);
  EXPECT_EQ(moe->num_layers, 48);
  EXPECT_EQ(moe->num_heads, 32);
  EXPECT_EQ(moe->num_kv_heads, 4);
  EXPECT_EQ(moe->head_dim, 128);
  EXPECT_EQ(moe->moe.num_experts, 128);
  EXPECT_EQ(moe->moe.experts_per_tok, 8);
  EXPECT_EQ(moe->moe.intermediate_size, 768);
  EXPECT_TRUE(moe->moe.norm_topk_prob);
  EXPECT_EQ(moe->vocab_size, 151936);
  EXPECT_FALSE(moe->tie_word_embeddings);
}

TEST(SyntheticModelTest, SameSeedSameBytesOtherSeedOtherBytes) {
  std::string root = ScratchDir();
  SyntheticShape s;
  ASSERT_TRUE(WriteSyntheticModel(root + "/a", s, 42, "").ok());
  ASSERT_TRUE(WriteSyntheticModel(root + "/b", s, 42, "").ok());
  ASSERT_TRUE(WriteSyntheticModel(root + "/c", s, 43, "").ok());
  EXPECT_EQ(Hash(root + "/a/model.safetensors"), Hash(root + "/b/model.safetensors"));
  EXPECT_EQ(Hash(root + "/a/config.json"), Hash(root + "/b/config.json"));
  EXPECT_NE(Hash(root + "/a/model.safetensors"), Hash(root + "/c/model.safetensors"));
  EXPECT_EQ(Hash(root + "/a/config.json"), Hash(root + "/c/config.json"));
}

TEST(SyntheticModelTest, LayersAreSeededIndependently) {
  std::string root = ScratchDir();
  SyntheticShape two, three;
  three.layers = 3;
  ASSERT_TRUE(WriteSyntheticModel(root + "/two", two, 7, "").ok());
  ASSERT_TRUE(WriteSyntheticModel(root + "/three", three, 7, "").ok());
  SafetensorsFile a = MustOpen(root + "/two/model.safetensors");
  SafetensorsFile b = MustOpen(root + "/three/model.safetensors");
  for (const TensorInfo& t : a.tensors()) {
    EXPECT_EQ(*a.ReadBytes(t), *b.ReadBytes(*b.Find(t.name))) << t.name;
  }
  // ... while two tensors of the same shape differ.
  EXPECT_NE(*a.ReadBytes(*a.Find("model.layers.0.self_attn.q_proj.weight")),
            *a.ReadBytes(*a.Find("model.layers.1.self_attn.q_proj.weight")));
}

// Mean and standard deviation of a tensor's f32 values.
std::pair<double, double> Stats(const SafetensorsFile& f, const std::string& name) {
  const TensorInfo* t = f.Find(name);
  auto v = f.ReadF32(name, t->shape);
  double sum = 0, sq = 0;
  for (float x : *v) sum += x;
  double mean = sum / v->size();
  for (float x : *v) sq += (x - mean) * (x - mean);
  return {mean, std::sqrt(sq / v->size())};
}

TEST(SyntheticModelTest, ValueScalesAreAsDocumented) {
  std::string dir = ScratchDir();
  SyntheticShape s;
  s.bias = true;
  ASSERT_TRUE(WriteSyntheticModel(dir, s, 5, "").ok());
  SafetensorsFile f = MustOpen(dir + "/model.safetensors");
  auto [m_up, sd_up] = Stats(f, "model.layers.0.mlp.up_proj.weight");  // fan_in 64
  EXPECT_NEAR(m_up, 0.0, 0.01);
  EXPECT_NEAR(sd_up, 1.0 / 8, 0.01);
  auto [m_down, sd_down] = Stats(f, "model.layers.0.mlp.down_proj.weight");  // fan_in 128
  EXPECT_NEAR(sd_down, 1.0 / std::sqrt(128.0), 0.01);
  auto [m_norm, sd_norm] = Stats(f, "model.layers.1.input_layernorm.weight");
  EXPECT_NEAR(m_norm, 1.0, 0.05);
  EXPECT_GT(sd_norm, 0.05);
  EXPECT_LT(sd_norm, 0.2);
  auto [m_b, sd_b] = Stats(f, "model.layers.0.self_attn.q_proj.bias");
  EXPECT_NEAR(sd_b, 0.1, 0.03);
  // The generator really varies (not a constant, not a handful of values).
  const TensorInfo* e = f.Find("model.embed_tokens.weight");
  auto v = f.ReadF32(e->name, e->shape);
  std::set<float> distinct(v->begin(), v->end());
  EXPECT_GT(distinct.size(), 1000u);
}

TEST(SyntheticModelTest, ConfigOverrideIsCopiedByteExact) {
  std::string cfg = SharedPath("fixtures/conformance/tiny-qwen/config.json");
  if (!testing::Exists(cfg)) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << cfg;
  std::string dir = ScratchDir() + "/m";
  SyntheticShape ignored;
  ignored.hidden = 8;
  ASSERT_TRUE(WriteSyntheticModel(dir, ignored, 3, cfg).ok());
  EXPECT_EQ(Hash(dir + "/config.json"), Hash(cfg));
  ExpectTensors(dir, false);  // tiny-qwen's config has no attention_bias
  SafetensorsFile f = MustOpen(dir + "/model.safetensors");
  EXPECT_EQ(f.Find("lm_head.weight")->shape, (std::vector<int64_t>{600, 64}));
}

TEST(SyntheticModelTest, ConfigOverrideWithAttentionBias) {
  std::string root = ScratchDir();
  SyntheticShape s;
  s.bias = true;
  std::string cfg = root + "/cfg.json";
  {
    std::ofstream(cfg) << SyntheticConfigJson(s);
  }
  ASSERT_TRUE(WriteSyntheticModel(root + "/m", SyntheticShape{}, 3, cfg).ok());
  ExpectTensors(root + "/m", true);
}

TEST(SyntheticModelTest, BadOverrideIsReported) {
  std::string root = ScratchDir();
  Status st = WriteSyntheticModel(root + "/m", SyntheticShape{}, 1, root + "/absent.json");
  EXPECT_EQ(st.kind(), ErrorKind::kNotFound);
  std::ofstream(root + "/bad.json") << "{\"hidden_size\": 64}";
  st = WriteSyntheticModel(root + "/m2", SyntheticShape{}, 1, root + "/bad.json");
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_NE(st.message().find("bad.json"), std::string::npos) << st.message();
}

TEST(SyntheticModelTest, SmolLM2SizedCheckpointHasThe272Tensors) {
  std::string dir = ScratchDir();
  ASSERT_TRUE(WriteSyntheticModel(dir, SmolLM2Shape(), 1, "").ok());
  SafetensorsFile f = MustOpen(dir + "/model.safetensors");
  EXPECT_EQ(f.tensors().size(), 272u);  // §2.5
  EXPECT_EQ(f.Find("lm_head.weight"), nullptr);
  ExpectTensors(dir, false);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace lockstep
