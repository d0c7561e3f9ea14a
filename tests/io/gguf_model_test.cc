// A GGUF file as a model: its config from metadata (E2.2's rules one by
// one), its tensors under their §2.5 names (llama q/k rows un-permuted,
// expert stacks split), a synthetic GGUF holding the same values as the
// synthetic safetensors folder of the same seed, and its parts hashed on
// their own (what a pipeline stage proves its bytes with).
#include <gtest/gtest.h>

#include <bit>
#include <fstream>

#include "engine/io/checkpoint.h"
#include "engine/io/gguf.h"
#include "engine/io/gguf_config.h"
#include "engine/io/gguf_names.h"
#include "engine/io/gguf_writer.h"
#include "engine/io/model_files.h"
#include "engine/io/synthetic_gguf.h"
#include "engine/io/synthetic_model.h"
#include "tests/fixture_absent.h"
#include "tests/io/test_util.h"

namespace lockstep {
namespace {

using testing::Exists;
using testing::ReadAll;
using testing::ScratchDir;
using testing::SharedPath;

constexpr char kName[] = "model.gguf";

// A small llama file: 2 layers of hidden 64, its keys overridable.
GgufWriter SmallLlama(const std::vector<std::pair<std::string, GgufValue>>& replace = {},
                      const std::vector<std::string>& drop = {}) {
  ModelConfig c;
  c.model_type = "llama";
  c.hidden_size = 64, c.intermediate_size = 128, c.num_layers = 2, c.num_heads = 4;
  c.num_kv_heads = 2, c.head_dim = 16, c.max_position_embeddings = 256;
  c.rms_norm_eps = 1e-5f, c.rope_theta = 10000.0f;
  GgufWriter w;
  for (const auto& [key, value] : GgufConfigKeys(c)) {
    if (std::find(drop.begin(), drop.end(), key) != drop.end()) continue;
    bool replaced = false;
    for (const auto& [k, v] : replace) replaced = replaced || k == key;
    if (!replaced) w.Set(key, value);
  }
  for (const auto& [k, v] : replace) w.Set(k, v);
  w.AddTensor("token_embd.weight", DType::kF32, {64, 10}, std::vector<uint8_t>(64 * 10 * 4, 0));
  return w;
}

Result<ModelConfig> ConfigOf(const GgufWriter& w) {
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, w.Bytes());
  LOCKSTEP_ASSIGN_OR_RETURN(GgufFile f, GgufFile::FromBuffer(std::move(bytes), kName));
  return ModelConfigFromGguf(f);
}

void ExpectRefused(const GgufWriter& w, ErrorKind kind, const std::string& words) {
  const Result<ModelConfig> c = ConfigOf(w);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().kind(), kind) << c.status().ToString();
  EXPECT_NE(c.status().message().find(kName), std::string::npos) << c.status().message();
  EXPECT_NE(c.status().message().find(words), std::string::npos) << c.status().message();
}

TEST(GgufConfigTest, TheKeysGiveTheConfig) {
  auto c = ConfigOf(SmallLlama());
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->model_type, "llama");
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_layers, 2);
  EXPECT_EQ(c->num_kv_heads, 2);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->vocab_size, 10);
  EXPECT_EQ(c->max_position_embeddings, 256);
  EXPECT_TRUE(c->tie_word_embeddings);  // no output.weight
  EXPECT_EQ(std::bit_cast<uint32_t>(c->rms_norm_eps), std::bit_cast<uint32_t>(1e-5f));
  EXPECT_EQ(c->layer_window, (std::vector<int>{0, 0}));
  EXPECT_TRUE(c->rope_freqs.empty());
}

TEST(GgufConfigTest, FloatsAreF32AsIsOrF64RoundedOnce) {
  // 1e-5 as f64 rounds to the f32 nearest it; 0.1f as an f32 stays itself.
  auto c = ConfigOf(SmallLlama({{"llama.attention.layer_norm_rms_epsilon", GgufF64(1e-5)},
                                {"llama.rope.freq_base", GgufF32(0.1f)}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rms_norm_eps, static_cast<float>(1e-5));
  EXPECT_EQ(c->rope_theta, 0.1f);
  auto absent = ConfigOf(SmallLlama({}, {"llama.rope.freq_base"}));
  ASSERT_TRUE(absent.ok());
  EXPECT_EQ(absent->rope_theta, 10000.0f);
  ExpectRefused(SmallLlama({}, {"llama.attention.layer_norm_rms_epsilon"}), ErrorKind::kInvalid,
                "llama.attention.layer_norm_rms_epsilon\": missing");
  ExpectRefused(SmallLlama({{"llama.rope.freq_base", GgufU32(5)}}), ErrorKind::kInvalid,
                "not an f32 or f64");
  ExpectRefused(SmallLlama({{"llama.rope.freq_base", GgufF32(-1.0f)}}), ErrorKind::kInvalid,
                "positive and finite");
}

TEST(GgufConfigTest, SizesAndHeads) {
  auto any_int = ConfigOf(SmallLlama({{"llama.block_count", GgufI32(2)}}));
  EXPECT_TRUE(any_int.ok()) << any_int.status().ToString();
  ExpectRefused(SmallLlama({{"llama.block_count", GgufI32s({2, 2})}}), ErrorKind::kInvalid,
                "per-layer");
  ExpectRefused(SmallLlama({{"llama.block_count", GgufI32(0)}}), ErrorKind::kInvalid,
                "llama.block_count\": must be in [1");
  ExpectRefused(SmallLlama({{"llama.block_count", GgufString("2")}}), ErrorKind::kInvalid,
                "not an integer");
  ExpectRefused(SmallLlama({}, {"llama.context_length"}), ErrorKind::kInvalid, "context_length");
  ExpectRefused(SmallLlama({{"llama.attention.head_count_kv", GgufU32(3)}}), ErrorKind::kInvalid,
                "does not divide");
  auto kv_absent = ConfigOf(SmallLlama({}, {"llama.attention.head_count_kv"}));
  ASSERT_TRUE(kv_absent.ok());
  EXPECT_EQ(kv_absent->num_kv_heads, 4);
  ExpectRefused(SmallLlama({{"llama.rope.dimension_count", GgufU32(8)}}), ErrorKind::kInvalid,
                "differs from head_dim 16");
  ExpectRefused(SmallLlama({{"llama.attention.value_length", GgufU32(8)}}), ErrorKind::kInvalid,
                "llama.attention.value_length");
  auto key_length = ConfigOf(SmallLlama({{"llama.attention.key_length", GgufU32(32)},
                                         {"llama.rope.dimension_count", GgufU32(32)}}));
  ASSERT_TRUE(key_length.ok()) << key_length.status().ToString();
  EXPECT_EQ(key_length->head_dim, 32);
  ExpectRefused(SmallLlama({{"llama.attention.head_count", GgufU32(5)}}, {"llama.attention.head_count_kv"}),
                ErrorKind::kInvalid, "does not divide embedding_length");
}

TEST(GgufConfigTest, ArchitectureRopeScalingAndVocab) {
  ExpectRefused(SmallLlama({{"general.architecture", GgufString("falcon")}}),
                ErrorKind::kUnimplemented, "\"falcon\"");
  ExpectRefused(SmallLlama({{"llama.rope.scaling.type", GgufString("linear")}}),
                ErrorKind::kUnimplemented, "linear");
  auto none = ConfigOf(SmallLlama({{"llama.rope.scaling.type", GgufString("none")}}));
  EXPECT_TRUE(none.ok());
  std::vector<std::string> nine(9, "t");
  ExpectRefused(SmallLlama({{"tokenizer.ggml.tokens", GgufStrings(nine)}}), ErrorKind::kInvalid,
                "lists 9 tokens");
  GgufWriter no_embd;
  for (const auto& [k, v] : GgufConfigKeys(*ConfigOf(SmallLlama()))) no_embd.Set(k, v);
  ExpectRefused(no_embd, ErrorKind::kInvalid, "token_embd.weight\" not found");
}

TEST(GgufConfigTest, Qwen3AndQwen3MoeKeys) {
  auto dense = ConfigOf(SmallLlama({{"general.architecture", GgufString("qwen3")},
                                    {"qwen3.block_count", GgufU32(2)},
                                    {"qwen3.context_length", GgufU32(256)},
                                    {"qwen3.embedding_length", GgufU32(64)},
                                    {"qwen3.feed_forward_length", GgufU32(128)},
                                    {"qwen3.attention.head_count", GgufU32(4)},
                                    {"qwen3.attention.key_length", GgufU32(32)},
                                    {"qwen3.attention.layer_norm_rms_epsilon", GgufF32(1e-6f)}}));
  ASSERT_TRUE(dense.ok()) << dense.status().ToString();
  EXPECT_EQ(dense->model_type, "qwen3");
  EXPECT_TRUE(dense->qk_norm);
  EXPECT_EQ(dense->head_dim, 32);  // key_length, not hidden / heads
  EXPECT_FALSE(dense->is_moe());
  const std::vector<std::pair<std::string, GgufValue>> moe_keys = {
      {"general.architecture", GgufString("qwen3moe")},
      {"qwen3moe.block_count", GgufU32(2)},
      {"qwen3moe.context_length", GgufU32(256)},
      {"qwen3moe.embedding_length", GgufU32(64)},
      {"qwen3moe.attention.head_count", GgufU32(4)},
      {"qwen3moe.attention.layer_norm_rms_epsilon", GgufF32(1e-6f)},
      {"qwen3moe.expert_count", GgufU32(8)},
      {"qwen3moe.expert_used_count", GgufU32(2)},
      {"qwen3moe.expert_feed_forward_length", GgufU32(32)}};
  auto moe = ConfigOf(SmallLlama(moe_keys));
  ASSERT_TRUE(moe.ok()) << moe.status().ToString();
  EXPECT_EQ(moe->model_type, "qwen3_moe");
  EXPECT_EQ(moe->moe.num_experts, 8);
  EXPECT_EQ(moe->moe.experts_per_tok, 2);
  EXPECT_EQ(moe->moe.intermediate_size, 32);
  EXPECT_TRUE(moe->moe.norm_topk_prob);  // absent: true (llama.cpp renormalises)
  EXPECT_EQ(moe->intermediate_size, 0);  // no feed_forward_length needed
  auto keys = moe_keys;
  keys.push_back({"qwen3moe.expert_weights_norm", GgufBool(false)});
  EXPECT_FALSE(ConfigOf(SmallLlama(keys))->moe.norm_topk_prob);
  keys.back() = {"qwen3moe.expert_weights_norm", GgufU32(0)};
  ExpectRefused(SmallLlama(keys), ErrorKind::kInvalid, "expert_weights_norm\": is not a bool");
  // The writer's keys read back.
  auto round = ConfigOf([&] {
    GgufWriter w;
    for (const auto& [k, v] : GgufConfigKeys(*moe)) w.Set(k, v);
    w.AddTensor("token_embd.weight", DType::kF32, {64, 10}, std::vector<uint8_t>(64 * 10 * 4, 0));
    return w;
  }());
  ASSERT_TRUE(round.ok()) << round.status().ToString();
  EXPECT_EQ(round->moe.num_experts, 8);
  EXPECT_EQ(round->head_dim, 16);
}

TEST(GgufConfigTest, RopeFreqsAreReadAsTheConfigsDivisors) {
  GgufWriter w = SmallLlama();
  const std::vector<float> freqs = {1, 1, 2, 2, 4, 4, 8, 8};
  w.AddF32Vector(kGgufRopeFreqs, freqs);
  auto c = ConfigOf(w);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rope_freqs, freqs);
  GgufWriter bad = SmallLlama();
  bad.AddF32Vector(kGgufRopeFreqs, std::vector<float>(7, 1.0f));
  ExpectRefused(bad, ErrorKind::kInvalid, "head_dim / 2 = 8");
}

TEST(GgufConfigTest, TheConformanceFixturesConfigs) {
  const std::string q8 = SharedPath("fixtures/conformance/tiny-gguf-q8_0/model.gguf");
  const std::string q4 = SharedPath("fixtures/conformance/tiny-gguf-q4_k_m/model.gguf");
  if (!Exists(q8) || !Exists(q4)) LOCKSTEP_FIXTURE_ABSENT() << "GGUF fixtures absent";
  auto a = ModelConfigFromGguf(*GgufFile::Open(q8));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->vocab_size, 512);
  EXPECT_FALSE(a->tie_word_embeddings);
  EXPECT_EQ(a->rope_theta, 100000.0f);
  auto b = ModelConfigFromGguf(*GgufFile::Open(q4));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->hidden_size, 256);
  EXPECT_EQ(b->head_dim, 64);
  EXPECT_TRUE(b->tie_word_embeddings);
}

TEST(GgufNamesTest, NamesBothWays) {
  EXPECT_TRUE(IsGgufTensorName("blk.12.ffn_down_exps.weight"));
  EXPECT_TRUE(IsGgufTensorName("rope_freqs.weight"));
  EXPECT_FALSE(IsGgufTensorName("blk.x.attn_q.weight"));
  EXPECT_FALSE(IsGgufTensorName("blk.1.attn_q.weight.x"));
  EXPECT_FALSE(IsGgufTensorName("blk.1."));
  EXPECT_EQ(GgufNameOf("model.layers.7.self_attn.k_proj.bias"), "blk.7.attn_k.bias");
  EXPECT_EQ(GgufNameOf("model.layers.0.mlp.down_proj.weight"), "blk.0.ffn_down.weight");
  EXPECT_EQ(GgufNameOf("lm_head.weight"), "output.weight");
  EXPECT_EQ(GgufNameOf("model.layers.0.mlp.experts.3.down_proj.weight"), std::nullopt);
  EXPECT_EQ(GgufLayerOf("blk.31.attn_v.weight"), 31);
  EXPECT_EQ(GgufLayerOf("output.weight"), std::nullopt);
}

TEST(GgufNamesTest, ExpertStacksAreSplitIntoMatrices) {
  GgufWriter w = SmallLlama();
  std::vector<uint8_t> stack(3 * 128 * 64 * 4);
  for (size_t i = 0; i < stack.size(); ++i) stack[i] = static_cast<uint8_t>(i * 13);
  w.AddTensor("blk.1.ffn_up_exps.weight", DType::kF32, {64, 128, 3}, stack);
  auto f = GgufFile::FromBuffer(*w.Bytes(), kName);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  auto hf = HfTensorsOf(*f, *ModelConfigFromGguf(*f));
  ASSERT_TRUE(hf.ok()) << hf.status().ToString();
  int experts = 0;
  for (const HfTensor& t : *hf) {
    if (t.gguf_name != "blk.1.ffn_up_exps.weight") continue;
    EXPECT_EQ(t.info.name, "model.layers.1.mlp.experts." + std::to_string(experts) + ".up_proj.weight");
    EXPECT_EQ(t.info.shape, (std::vector<int64_t>{128, 64}));
    EXPECT_EQ(t.info.nbytes, 128u * 64 * 4);
    EXPECT_EQ(*f->ReadBytes(t.info),
              std::vector<uint8_t>(stack.begin() + experts * 128 * 64 * 4,
                                   stack.begin() + (experts + 1) * 128 * 64 * 4));
    ++experts;
  }
  EXPECT_EQ(experts, 3);
  GgufWriter past = SmallLlama();
  past.AddTensor("blk.2.attn_norm.weight", DType::kF32, {64}, std::vector<uint8_t>(256));
  auto g = GgufFile::FromBuffer(*past.Bytes(), kName);
  ASSERT_TRUE(g.ok());
  const Status st = HfTensorsOf(*g, *ModelConfigFromGguf(*g)).status();
  EXPECT_NE(st.message().find("layer 2 is past block_count 2"), std::string::npos) << st.ToString();
}

// The bf16 synthetic GGUF holds the synthetic folder's values: every §2.5
// tensor reads back equal, q/k rows (and qwen2 biases, unpermuted) in
// place, qwen3's q/k norms and qwen3moe's router and expert stacks too.
class SyntheticGgufTest : public ::testing::TestWithParam<std::string> {};

SyntheticShape ArchShape(const std::string& arch) {
  SyntheticShape s;
  s.hidden = 64, s.heads = 4, s.kv_heads = 2;
  s.bias = arch == "qwen2";
  s.untied = arch != "llama";
  s.qwen3 = arch == "qwen3" || arch == "qwen3moe";
  if (s.qwen3) s.head_dim = 32;
  if (arch == "qwen3moe") s.experts = 4, s.top_k = 2, s.moe_inter = 32, s.norm_topk = true;
  return s;
}

TEST_P(SyntheticGgufTest, HoldsTheFoldersValues) {
  const std::string arch = GetParam();
  const std::string dir = ScratchDir();
  const SyntheticShape s = ArchShape(arch);
  ASSERT_TRUE(WriteSyntheticModel(dir + "/folder", s, 11, "").ok());
  auto cfg = LoadModelConfig(dir + "/folder/config.json");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  for (const char* type : {"bf16", "f32"}) {
    SCOPED_TRACE(type);
    const std::string path = dir + "/m-" + type + ".gguf";
    ASSERT_TRUE(WriteSyntheticGguf(path, *cfg, s.bias, *GgufQuantMixByName(type), 11, {}).ok());
    auto folder = Checkpoint::Open(dir + "/folder/model.safetensors");
    auto gguf = Checkpoint::Open(path);
    ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
    EXPECT_EQ(gguf->tensor_names(), folder->tensor_names());
    EXPECT_EQ(gguf->gguf_config()->model_type, cfg->model_type);
    EXPECT_EQ(gguf->gguf_config()->moe.num_experts, cfg->moe.num_experts);
    int permuted = 0;
    for (const std::string& name : folder->tensor_names()) {
      const TensorInfo& t = *gguf->Find(name).info;
      permuted += t.permuted_heads > 0;
      const auto want = folder->ReadF32(name, folder->Find(name).info->shape);
      const auto got = gguf->ReadF32(name, t.shape);
      ASSERT_TRUE(got.ok()) << got.status().ToString();
      EXPECT_EQ(*got, *want) << name;
    }
    EXPECT_EQ(permuted, arch == "llama" ? 4 : 0);  // q and k of each llama layer
  }
}

INSTANTIATE_TEST_SUITE_P(Archs, SyntheticGgufTest,
                         ::testing::Values("llama", "qwen2", "qwen3", "qwen3moe"),
                         [](const auto& info) { return info.param; });

TEST(SyntheticGgufTest, QuantizedMixesAreValidFiles) {
  const std::string dir = ScratchDir();
  SyntheticShape s;
  s.hidden = 256, s.inter = 512, s.layers = 8, s.vocab = 300;
  auto cfg = ParseModelConfig(SyntheticConfigJson(s), "shape");
  ASSERT_TRUE(cfg.ok());
  for (const char* type : {"q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "q4_k_m", "f16"}) {
    SCOPED_TRACE(type);
    const std::string path = dir + "/" + type + ".gguf";
    ASSERT_TRUE(WriteSyntheticGguf(path, *cfg, false, *GgufQuantMixByName(type), 3, {}).ok());
    auto f = GgufFile::Open(path);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    const DType mix = f->FindTensor("blk.0.ffn_gate.weight")->dtype;
    if (std::string(type) == "q4_k_m") {
      EXPECT_EQ(mix, DType::kQ4_K);
      // llama.cpp's use-more-bits layers of 8: 0 (i < 1), 3 ((3-1)%3 == 2), 6, 7.
      for (int i = 0; i < 8; ++i) {
        const bool more = i == 0 || i == 3 || i == 6 || i == 7;
        EXPECT_EQ(f->FindTensor("blk." + std::to_string(i) + ".ffn_down.weight")->dtype,
                  more ? DType::kQ6_K : DType::kQ4_K) << i;
        EXPECT_EQ(f->FindTensor("blk." + std::to_string(i) + ".attn_q.weight")->dtype, DType::kQ4_K);
      }
      EXPECT_EQ(f->FindTensor("token_embd.weight")->dtype, DType::kQ6_K);  // the tied output
    }
    EXPECT_EQ(f->FindTensor("blk.0.attn_norm.weight")->dtype, DType::kF32);
    ASSERT_TRUE(Checkpoint::Open(path).ok());
  }
  // Rows of 576 are not whole K-quant blocks: llama.cpp's fallbacks, or
  // the nearest E2.3 type.
  s.hidden = 576, s.inter = 1536, s.heads = 9, s.kv_heads = 3;
  auto smol = ParseModelConfig(SyntheticConfigJson(s), "shape");
  ASSERT_TRUE(WriteSyntheticGguf(dir + "/smol.gguf", *smol, false, *GgufQuantMixByName("q4_k_m"), 3, {}).ok());
  auto f = GgufFile::Open(dir + "/smol.gguf");
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->FindTensor("blk.1.attn_q.weight")->dtype, DType::kQ4_0);     // Q4_K
  EXPECT_EQ(f->FindTensor("blk.0.attn_v.weight")->dtype, DType::kQ8_0);     // Q6_K
  EXPECT_EQ(f->FindTensor("blk.1.ffn_down.weight")->dtype, DType::kQ4_K);   // rows of 1536
  EXPECT_EQ(f->FindTensor("blk.0.ffn_down.weight")->dtype, DType::kQ6_K);
  EXPECT_EQ(f->FindTensor("token_embd.weight")->dtype, DType::kQ8_0);       // the tied output
  s.hidden = 48, s.heads = 4, s.kv_heads = 2;  // rows of 48: not whole blocks of any quant type
  auto tiny = ParseModelConfig(SyntheticConfigJson(s), "shape");
  const Status st = WriteSyntheticGguf(dir + "/x.gguf", *tiny, false, *GgufQuantMixByName("q8_0"), 3, {});
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_NE(st.message().find("not whole Q8_0 blocks"), std::string::npos) << st.ToString();
}

TEST(SyntheticGgufTest, F16RoundsToNearestEven) {
  EXPECT_EQ(F16RoundNearestEven(1.0f), 0x3C00);
  EXPECT_EQ(F16RoundNearestEven(-2.0f), 0xC000);
  EXPECT_EQ(F16RoundNearestEven(65504.0f), 0x7BFF);
  EXPECT_EQ(F16RoundNearestEven(65520.0f), 0x7C00);     // the tie rounds to even: infinity
  EXPECT_EQ(F16RoundNearestEven(0x1p-24f), 0x0001);     // the smallest subnormal
  EXPECT_EQ(F16RoundNearestEven(0x1p-25f), 0x0000);     // half of it: tie to even 0
  EXPECT_EQ(F16RoundNearestEven(0x1.8p-24f), 0x0002);   // 1.5 units: tie to even 2
  EXPECT_EQ(F16RoundNearestEven(0x1p-14f), 0x0400);     // the smallest normal
  EXPECT_EQ(F16RoundNearestEven(1.0f + 0x1p-11f), 0x3C00);  // tie to even
  EXPECT_EQ(F16RoundNearestEven(1.0f + 0x1.8p-11f), 0x3C01);
}

// A partial open reads only the header, rope_freqs and the wanted tensors'
// parts, each hashed as sha256 of exactly its bytes; a whole open with
// kAll gives the file's digest and every part's.
TEST(GgufPartsTest, PartsHashExactlyTheirBytes) {
  const std::string dir = ScratchDir();
  SyntheticShape s;
  s.layers = 3;
  auto cfg = ParseModelConfig(SyntheticConfigJson(s), "shape");
  cfg->rope_freqs.assign(static_cast<size_t>(cfg->head_dim / 2), 2.0f);
  const std::string path = dir + "/m.gguf";
  ASSERT_TRUE(WriteSyntheticGguf(path, *cfg, false, *GgufQuantMixByName("q8_0"), 5, {}).ok());
  const std::vector<uint8_t> bytes = ReadAll(path);
  auto slice = [&](uint64_t at, uint64_t n) {
    return Sha256(std::span<const uint8_t>(bytes.data() + at, n));
  };
  auto whole = Checkpoint::Open(path);
  ASSERT_TRUE(whole.ok());
  EXPECT_FALSE(whole->partial());
  auto all = whole->HashFiles(2, Checkpoint::Parts::kAll);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 1 + whole->parts().size());
  EXPECT_EQ((*all)[0].file, "m.gguf");
  EXPECT_EQ((*all)[0].sha256, Sha256(std::span<const uint8_t>(bytes)));
  EXPECT_EQ(whole->parts()[0].name, "m.gguf:header");
  EXPECT_EQ(whole->parts().size(), 1 + 1 + 3 * 9 + 1 + 1);  // embd, layers, norm, rope_freqs
  for (size_t i = 0; i < whole->parts().size(); ++i) {
    const DigestRange& p = whole->parts()[i];
    EXPECT_EQ((*all)[1 + i].file, p.name);
    EXPECT_EQ((*all)[1 + i].sha256, slice(p.offset, p.size)) << p.name;
  }
  // Only the whole file's digest unless asked.
  EXPECT_EQ(whole->HashFiles(1)->size(), 1u);

  auto part = Checkpoint::Open(path, [](std::string_view n) {
    return n.find("model.layers.1.") == 0;
  });
  ASSERT_TRUE(part.ok());
  EXPECT_TRUE(part->partial());
  EXPECT_FALSE(part->hashes_whole());
  EXPECT_EQ(part->Find("model.layers.0.input_layernorm.weight").file, nullptr);
  std::vector<std::string> names = part->digest_names();
  ASSERT_EQ(names.size(), 1 + 1 + 9u);  // header, rope_freqs, layer 1
  EXPECT_EQ(names[0], "m.gguf:header");
  EXPECT_NE(std::find(names.begin(), names.end(), "m.gguf:rope_freqs.weight"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "m.gguf:blk.1.attn_q.weight"), names.end());
  auto mine = part->HashFiles(1);
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  ASSERT_EQ(mine->size(), names.size());
  for (const FileDigest& d : *mine) {
    auto in_all = std::find_if(all->begin(), all->end(), [&](const FileDigest& a) { return a.file == d.file; });
    ASSERT_NE(in_all, all->end()) << d.file;
    EXPECT_EQ(in_all->sha256, d.sha256) << d.file;
  }
}

TEST(GgufPartsTest, AHeaderChangedAfterParsingIsAMismatch) {
  const std::string dir = ScratchDir();
  auto cfg = ParseModelConfig(SyntheticConfigJson(SyntheticShape()), "shape");
  const std::string path = dir + "/m.gguf";
  ASSERT_TRUE(WriteSyntheticGguf(path, *cfg, false, *GgufQuantMixByName("f32"), 5,
                                 {{"general.name", GgufString("aaaa")}}).ok());
  auto c = Checkpoint::Open(path);
  ASSERT_TRUE(c.ok());
  std::vector<uint8_t> bytes = ReadAll(path);
  const std::string name = "aaaa";
  auto at = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(at, bytes.end());
  *at = 'b';  // same size, in place
  std::fstream(path, std::ios::in | std::ios::out | std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  const Status st = c->HashFiles(1).status();
  EXPECT_EQ(st.kind(), ErrorKind::kMismatch) << st.ToString();
  EXPECT_NE(st.message().find("header"), std::string::npos) << st.ToString();
}

TEST(GgufModelFilesTest, AGgufFileIsAModel) {
  const std::string dir = ScratchDir();
  auto cfg = ParseModelConfig(SyntheticConfigJson(SyntheticShape()), "shape");
  const std::string path = dir + "/m.gguf";
  ASSERT_TRUE(WriteSyntheticGguf(path, *cfg, false, *GgufQuantMixByName("bf16"), 5, {}).ok());
  auto files = LocateModelFiles(path);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_TRUE(files->gguf);
  EXPECT_EQ(files->dir, dir);
  EXPECT_EQ(files->weights_path, path);
  auto small = HashConfigAndTokenizer(*files);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->config, Digest{});  // known once the file is hashed
  auto ckpt = Checkpoint::Open(path);
  auto h = HashArtifacts(*files, *ckpt, 2);
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  const Digest file = Sha256(std::span<const uint8_t>(ReadAll(path)));
  EXPECT_EQ(h->weights, file);  // E2.5: the three are the file's digest
  EXPECT_EQ(h->config, file);
  EXPECT_EQ(h->tokenizer, file);
  ModelPins pins;
  pins.weights = Digest{};
  const Status st = VerifyPins(*h, pins);
  EXPECT_NE(st.message().find("m.gguf: sha256 expected"), std::string::npos) << st.ToString();
  std::ofstream(dir + "/notes.txt") << "x";
  EXPECT_FALSE(LocateModelFiles(dir + "/notes.txt").ok());
}

}  // namespace
}  // namespace lockstep
