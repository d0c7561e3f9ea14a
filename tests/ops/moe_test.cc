// E4's routing exactly as EXTENSIONS.md states it: top-k by strict > with
// ties to the lower index, the renormalisation summed in ascending expert
// index; and, on a whole model built so that router probabilities tie,
// the expert a tie leaves out is never read.
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <functional>

#include "engine/io/safetensors.h"
#include "engine/moe.h"
#include "model_fixture.h"

namespace lockstep::testing {
namespace {

struct Choice {
  std::vector<uint32_t> chosen;
  std::vector<float> weight;
};

Choice Choose(const std::vector<float>& p, size_t k, bool norm) {
  Choice c{std::vector<uint32_t>(k), std::vector<float>(k)};
  std::vector<uint8_t> taken(p.size());
  ChooseExperts(p.data(), p.size(), k, norm, taken.data(), c.chosen.data(), c.weight.data());
  return c;
}

TEST(MoeRouting, TiesGoToTheLowerIndex) {
  const std::vector<float> p = {0.1f, 0.3f, 0.3f, 0.2f, 0.3f};
  EXPECT_EQ(Choose(p, 1, false).chosen, (std::vector<uint32_t>{1}));
  EXPECT_EQ(Choose(p, 2, false).chosen, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(Choose(p, 3, false).chosen, (std::vector<uint32_t>{1, 2, 4}));
  EXPECT_EQ(Choose(p, 4, false).chosen, (std::vector<uint32_t>{1, 2, 3, 4}));
  EXPECT_EQ(Choose(p, 5, false).chosen, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
  const std::vector<float> same(8, 0.125f);  // every probability equal
  EXPECT_EQ(Choose(same, 3, true).chosen, (std::vector<uint32_t>{0, 1, 2}));
  // -0 and +0 compare equal: a tie, not an order.
  EXPECT_EQ(Choose({-0.0f, 0.0f, -1.0f}, 1, false).chosen, (std::vector<uint32_t>{0}));
  EXPECT_EQ(Choose({-1.0f, -0.0f, 0.0f}, 1, false).chosen, (std::vector<uint32_t>{1}));
}

TEST(MoeRouting, WeightsAreTheProbabilitiesOrRenormalisedInAscendingIndex) {
  // Chosen largest first (2, 1, 0), summed in ascending index: the two
  // orders round differently, so the test tells them apart.
  const std::vector<float> p = {0x1.2b020cp-4f, 0x1.820c48p-2f, 0x1.9a9fbep-1f, 0.01f};
  const float ascending = (p[0] + p[1]) + p[2];
  const float by_choice = (p[2] + p[1]) + p[0];
  ASSERT_NE(std::bit_cast<uint32_t>(ascending), std::bit_cast<uint32_t>(by_choice));
  const Choice c = Choose(p, 3, true);
  ASSERT_EQ(c.chosen, (std::vector<uint32_t>{0, 1, 2}));
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(std::bit_cast<uint32_t>(c.weight[j]), std::bit_cast<uint32_t>(p[j] / ascending)) << j;
  }
  const Choice raw = Choose(p, 3, false);
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(std::bit_cast<uint32_t>(raw.weight[j]), std::bit_cast<uint32_t>(p[j]));
}

// A 2-layer MoE model (5 experts, top 2) whose router rows are, per layer,
// -r, r, -r, r, r: so at every position either experts 1, 3 and 4 tie at
// the top (logit d > 0; the tie leaves 4 out) or 0 and 2 lead (d < 0).
// Returns its folder; `poison(e)` experts get NaN weights.
std::string TieModel(const std::string& tag, const std::vector<int>& poison) {
  const std::string dir = FreshPath(tag);
  SyntheticShape s;
  s.hidden = 48, s.layers = 2, s.heads = 4, s.kv_heads = 2, s.head_dim = 16, s.vocab = 200;
  s.untied = true, s.experts = 5, s.top_k = 2, s.moe_inter = 24, s.norm_topk = true;
  EXPECT_TRUE(WriteSyntheticModel(dir, s, 19, "").ok());
  auto f = SafetensorsFile::Open(dir + "/model.safetensors");
  EXPECT_TRUE(f.ok());
  SafetensorsWriter w;
  const size_t row_bytes = 2 * static_cast<size_t>(s.hidden);
  for (const TensorInfo& t : f->tensors()) {
    std::vector<uint8_t> bytes = *f->ReadBytes(t);
    if (t.name.ends_with("mlp.gate.weight")) {
      const std::vector<uint8_t> r(bytes.begin() + row_bytes, bytes.begin() + 2 * row_bytes);
      for (size_t e = 0; e < 5; ++e) {
        std::memcpy(bytes.data() + e * row_bytes, r.data(), row_bytes);
        if (e == 0 || e == 2) {  // -r: the sign bit of every bf16 flipped, exactly
          for (size_t i = 1; i < row_bytes; i += 2) bytes[e * row_bytes + i] ^= 0x80;
        }
      }
    }
    for (int e : poison) {
      if (t.name.find("mlp.experts." + std::to_string(e) + ".") == std::string::npos) continue;
      for (size_t i = 0; i < bytes.size(); i += 2) bytes[i] = 0xC0, bytes[i + 1] = 0x7F;  // NaN
    }
    w.Add(t.name, t.dtype, t.shape, std::move(bytes));
  }
  EXPECT_TRUE(w.WriteFile(dir + "/model.safetensors").ok());
  return dir;
}

std::vector<float> Logits(const std::string& dir, const Variant& v) {
  auto model = OpenModelDir(dir, ModelPins{});
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  if (!model.ok()) return {};
  return DecodeLogits(*Load(*model, v).stage, {3, 14, 15, 92, 65, 35, 89, 79, 32, 38}, 12);
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

TEST(MoeRouting, ATieLeavesTheHigherExpertUnread) {
  const std::string plain = TieModel("moe_tie", {});
  const std::string poison4 = TieModel("moe_tie_poison4", {4});
  const std::string poison3 = TieModel("moe_tie_poison3", {3});
  const std::string poison0 = TieModel("moe_tie_poison0", {0});
  for (const Variant& v : {Variant{"scalar", 1, WeightFormat::kPackedBf16},
                           Variant{ops::AvailableIsas().back(), 3, WeightFormat::kPackedBf16}}) {
    SCOPED_TRACE(v.Name());
    const std::vector<float> want = Logits(plain, v);
    ASSERT_FALSE(want.empty());
    // Expert 3 is read (so some position had 1, 3, 4 tied at the top)...
    EXPECT_FALSE(SameBits(Logits(poison3, v), want));
    EXPECT_FALSE(SameBits(Logits(poison0, v), want));  // ... and some had d < 0
    // ... but 4, tied with 3 each time 3 was chosen, never is.
    EXPECT_TRUE(SameBits(Logits(poison4, v), want));
  }
}

// A config built by another reader (GGUF) goes through the same checks as
// config.json: hostile E4 values are Invalid naming the field.
TEST(MoeConfig, CheckSupportedNamesTheField) {
  ModelConfig good;
  good.hidden_size = 64, good.num_layers = 2, good.num_heads = 4, good.num_kv_heads = 2;
  good.head_dim = 16, good.vocab_size = 100, good.qk_norm = true;
  good.moe = MoeConfig{8, 2, 32, true};
  ASSERT_TRUE(CheckSupported(good).ok()) << CheckSupported(good).ToString();
  struct Case {
    const char* field;
    std::function<void(ModelConfig&)> edit;
  };
  const Case cases[] = {
      {"num_experts_per_tok", [](ModelConfig& c) { c.moe.experts_per_tok = 9; }},
      {"num_experts_per_tok", [](ModelConfig& c) { c.moe.experts_per_tok = 0; }},
      {"num_experts", [](ModelConfig& c) { c.moe.num_experts = 1 << 20; }},
      {"num_experts", [](ModelConfig& c) { c.num_layers = 4000, c.moe.num_experts = 1000; }},
      {"moe_intermediate_size", [](ModelConfig& c) { c.moe.intermediate_size = 0; }},
      {"intermediate_size", [](ModelConfig& c) { c.moe.num_experts = 0; }},  // dense, no MLP
      {"head_dim", [](ModelConfig& c) { c.head_dim = 2048; }},
  };
  for (const Case& c : cases) {
    ModelConfig bad = good;
    c.edit(bad);
    const Status st = CheckSupported(bad);
    EXPECT_FALSE(st.ok()) << c.field;
    EXPECT_NE(st.message().find(std::string(c.field) + " "), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace lockstep::testing
