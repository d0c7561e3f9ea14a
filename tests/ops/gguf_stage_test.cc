// A GGUF model through the one loading path: the file's block sizes agree
// with the kernels', a BF16 GGUF computes exactly what the safetensors
// folder of the same values does (q/k rows permuted in the file, moved
// back as they are packed), every variant (ISA, threads, weights kept at
// their type or dequantized at load) gives the same logits on quantized
// files, weights stay resident at about the file's size, and
// rope_freqs.weight divides the inv_freq table.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/io/gguf.h"
#include "engine/io/synthetic_gguf.h"
#include "engine/ops/quant_blocks.h"
#include "engine/ops/rope.h"
#include "engine/rope_table.h"
#include "gguf_fixture.h"

namespace lockstep::testing {
namespace {

TEST(GgufStage, FileAndKernelBlockSizesAgree) {
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ4_0, DType::kQ8_0, DType::kQ4_K,
                  DType::kQ5_K, DType::kQ6_K}) {
    const std::optional<ops::GgmlBlock> b = ops::FindGgmlType(GgmlTypeOf(d));
    ASSERT_TRUE(b.has_value()) << DTypeName(d);
    EXPECT_EQ(b->elems, static_cast<size_t>(DTypeBlockElems(d))) << DTypeName(d);
    EXPECT_EQ(b->bytes, static_cast<size_t>(DTypeBlockBytes(d))) << DTypeName(d);
    EXPECT_EQ(std::string(b->name), std::string(DTypeName(d)));
    EXPECT_EQ(DTypeFromGgml(GgmlTypeOf(d)), d);
  }
}

const std::vector<uint32_t> kPrompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};

TEST(GgufStage, Bf16GgufComputesExactlyItsFolder) {
  for (const char* arch : {"llama", "qwen2", "qwen3", "qwen3moe"}) {
    SCOPED_TRACE(arch);
    const std::string a_name = arch;
    const std::string folder = FreshPath(std::string("gguf_folder_") + arch);
    SyntheticShape s;
    s.hidden = 64, s.layers = 2, s.heads = 4, s.kv_heads = 2, s.vocab = 300;
    s.bias = a_name == "qwen2", s.untied = a_name != "llama";
    s.qwen3 = a_name == "qwen3" || a_name == "qwen3moe";
    if (a_name == "qwen3moe") s.experts = 4, s.top_k = 2, s.moe_inter = 32, s.norm_topk = true;
    ASSERT_TRUE(WriteSyntheticModel(folder, s, 9, "").ok());
    auto cfg = LoadModelConfig(folder + "/config.json");
    const std::string path = folder + "/model.gguf";
    ASSERT_TRUE(WriteSyntheticGguf(path, *cfg, s.bias, *GgufQuantMixByName("bf16"), 9, {}).ok());
    auto a = OpenModelDir(folder, ModelPins{});
    auto b = OpenModelDir(path, ModelPins{});
    ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
    EXPECT_EQ(b->inv_freq_table_digest, a->inv_freq_table_digest);
    const Variant v{"auto", 2, WeightFormat::kPackedBf16};
    const std::vector<float> want = DecodeLogits(*Load(*a, v).stage, kPrompt, 8);
    const std::vector<float> got = DecodeLogits(*Load(*b, v).stage, kPrompt, 8);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  }
}

TEST(GgufStage, EveryVariantGivesTheSameLogitsOnEveryType) {
  for (const char* type : {"q8_0", "q4_0", "q4_k", "q5_k", "q6_k", "q4_k_m", "f16"}) {
    SCOPED_TRACE(type);
    auto model = OpenModelDir(GgufModel(type, type, std::string(type) == "q4_k_m"), ModelPins{});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    // The reference: weights dequantized at load, scalar kernels.
    const std::vector<float> want = DecodeLogits(*Load(*model, Variant{}).stage, kPrompt, 6);
    bool finite = true;
    for (float x : want) finite = finite && std::isfinite(x);
    EXPECT_TRUE(finite) << "a synthetic model's activations stay finite";
    // Each ISA's kernels on the weights at their own type, one and three
    // threads, and the packed-f32 path (AllVariants' full product is the
    // conformance test's; the kernels' own equality is quant_kernels_test's).
    std::vector<Variant> variants = {{"auto", 2, WeightFormat::kPackedF32}};
    for (const std::string& isa : ops::AvailableIsas()) {
      variants.push_back({isa, 1, WeightFormat::kPackedBf16});
      variants.push_back({isa, 3, WeightFormat::kPackedBf16});
    }
    for (const Variant& v : variants) {
      const std::vector<float> got = DecodeLogits(*Load(*model, v).stage, kPrompt, 6);
      ASSERT_EQ(got.size(), want.size());
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << v.Name();
    }
  }
}

TEST(GgufStage, WeightsStayAtAboutTheFilesSize) {
  for (const char* type : {"q8_0", "q4_k_m", "q6_k", "bf16"}) {
    SCOPED_TRACE(type);
    const std::string path = GgufModel(std::string("size_") + type, type);
    auto file = GgufFile::Open(path);
    uint64_t matrices = 0;
    for (const GgufTensor& t : file->tensors()) matrices += t.ne.size() == 2 ? t.nbytes : 0;
    auto model = OpenModelDir(path, ModelPins{});
    Loaded l = Load(*model, Variant{"auto", 1, WeightFormat::kPackedBf16});
    // Every matrix once (the tied embedding is the head).
    const double ratio = static_cast<double>(l.stage->weight_bytes_per_token()) /
                         static_cast<double>(matrices);
    EXPECT_GE(ratio, 0.99);
    EXPECT_LE(ratio, 1.1);
  }
}

TEST(GgufStage, RopeFreqsDivideTheInvFreqTable) {
  ModelConfig c;
  c.rope_theta = 500000.0f;
  c.head_dim = 16;
  c.rope_scaling = Llama3RopeScaling{8.0, 1.0, 4.0, 32.0};
  const std::vector<float> freqs = Llama3RopeFreqs(c);
  ASSERT_EQ(freqs.size(), 8u);
  EXPECT_EQ(freqs.front(), 1.0f);   // the highest frequency is left alone
  EXPECT_EQ(freqs.back(), 8.0f);    // the lowest is divided by the factor
  c.rope_scaling.reset();
  c.rope_freqs = freqs;
  const std::vector<float> plain = ops::InvFreq(c.rope_theta, c.head_dim);
  const std::vector<float> divided = ModelInvFreq(c);
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_EQ(divided[i], plain[i] / freqs[i]) << i;
}

}  // namespace
}  // namespace lockstep::testing
