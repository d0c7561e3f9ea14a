// Whole-model equality: the conformance vectors' digests for every ISA,
// thread count and weight format (bf16-resident vs widened at load), and
// batched sessions equal to their solo runs, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/io/synthetic_model.h"
#include "engine/local_backend.h"
#include "model_fixture.h"
#include "tests/fixture_absent.h"

namespace lockstep::testing {
namespace {

std::vector<uint32_t> Ids(const std::string& csv) {
  std::vector<uint32_t> out;
  size_t start = 0;
  while (start < csv.size()) {
    size_t end = csv.find(',', start);
    if (end == std::string::npos) end = csv.size();
    out.push_back(static_cast<uint32_t>(std::stoul(csv.substr(start, end - start))));
    start = end + 1;
  }
  return out;
}

// A vectors.json case as a DecodeRequest (+ window); false for --prompt cases.
bool ToRequest(const nlohmann::json& c, DecodeRequest* req, std::optional<int>* window) {
  const auto& a = c["args"];
  for (size_t i = 0; i + 1 < a.size(); i += 2) {
    const std::string k = a[i], v = a[i + 1];
    if (k == "--prompt") return false;
    if (k == "--ids") req->prompt = Ids(v);
    if (k == "--gen") req->gen = static_cast<uint32_t>(std::stoul(v));
    if (k == "--window") *window = std::stoi(v);
    if (k == "--evict") req->evictions.push_back(*ParseEvictSpec(v));
  }
  return true;
}

// vectors.json (CIS-2) and extension-vectors.json (EXTENSIONS.md: E1
// Llama-3 rope_scaling, E2 GGUF, E3 Qwen3, E4 Qwen3-MoE).
TEST(StageEquality, ConformanceVectorsOnEveryVariant) {
  const std::string path = ConformanceDir("vectors.json");
  if (!std::filesystem::exists(path)) LOCKSTEP_FIXTURE_ABSENT() << "conformance fixtures absent";
  nlohmann::json cases = nlohmann::json::array();
  for (const char* file : {"vectors.json", "extension-vectors.json"}) {
    std::ifstream in(ConformanceDir(file));
    const nlohmann::json doc = nlohmann::json::parse(in);
    for (const auto& c : doc["cases"]) cases.push_back(c);
  }
  size_t checked = 0;
  for (const auto& c : cases) {
    DecodeRequest req;
    std::optional<int> window;
    if (!ToRequest(c, &req, &window)) continue;
    auto model = OpenModelDir(ConformanceDir(c["model"]), ModelPins{});
    if (!model.ok()) {  // one case failing leaves the others checked
      ADD_FAILURE() << c["name"] << ": " << model.status().ToString();
      continue;
    }
    EXPECT_EQ(ToHex(model->inv_freq_table_digest), c["expect"]["inv_freq_table_digest"]) << c["name"];
    for (const Variant& v : AllVariants()) {
      SCOPED_TRACE(c["name"].get<std::string>() + " " + v.Name());
      Loaded l = Load(*model, v);
      LocalBackend backend(*l.stage);
      if (window) ASSERT_TRUE(backend.SetWindow(*window).ok());
      auto r = RunDecode(backend, req, model->Seed());
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(ToHex(r->cis2_ref), c["expect"]["cis2_ref"]);
      EXPECT_EQ(ToHex(r->argmax_digest), c["expect"]["argmax_digest"]);
      ++checked;
    }
  }
  EXPECT_GT(checked, 0u);
}

// A synthetic model with odd sizes (tails everywhere), bias and an untied head.
class SyntheticModel : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/lockstep_ops_synth");
    SyntheticShape s;
    s.hidden = 80, s.layers = 2, s.heads = 5, s.kv_heads = 1, s.inter = 200, s.vocab = 301;
    s.bias = true, s.untied = true;
    ASSERT_TRUE(WriteSyntheticModel(*dir_, s, 5, "").ok());
  }
  static std::string* dir_;
};
std::string* SyntheticModel::dir_ = nullptr;

// The model in `dir` decodes to the same logits bits on every variant.
void ExpectEveryVariantGivesTheSameLogits(const std::string& dir) {
  auto model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const std::vector<uint32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
  const std::vector<float> want = DecodeLogits(*Load(*model, Variant{}).stage, prompt, 12);
  for (const Variant& v : AllVariants()) {
    const std::vector<float> got = DecodeLogits(*Load(*model, v).stage, prompt, 12);
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0) << v.Name();
  }
}

TEST_F(SyntheticModel, EveryVariantGivesTheSameLogits) { ExpectEveryVariantGivesTheSameLogits(*dir_); }

// S sessions of different prompt lengths: batched prefill, then batched
// decode steps; every session's logits equal its solo run at every step.
void CheckBatchedEqualsSolo(OpenModel& model, const Variant& v) {
  Loaded l = Load(model, v);
  const Stage& st = *l.stage;
  const std::vector<std::vector<uint32_t>> prompts = {{1, 2, 3}, {7}, {9, 8, 7, 6, 5}, {4, 4}, {11, 12}};
  const size_t gen = 6, S = prompts.size(), h = st.hidden(), vocab = st.vocab();
  std::vector<std::vector<float>> solo;
  for (const auto& p : prompts) solo.push_back(DecodeLogits(st, p, gen));
  std::vector<KvCache> caches;
  std::vector<std::vector<float>> hidden(S);
  for (size_t i = 0; i < S; ++i) caches.push_back(st.NewCache(16));
  ForwardScratch scratch = st.NewScratch(16, 16);
  std::vector<float> last(S * h), logits(S * vocab);
  for (size_t step = 0; step < gen; ++step) {
    std::vector<Stage::BatchItem> items;
    for (size_t i = 0; i < S; ++i) {
      const std::vector<uint32_t> feed =
          step == 0 ? prompts[i]
                    : std::vector<uint32_t>{ops::ArgmaxFirst(logits.data() + i * vocab, vocab)};
      ASSERT_TRUE(st.Embed(feed, &hidden[i]).ok());
      items.push_back({hidden[i], static_cast<int64_t>(caches[i].size()), &caches[i]});
    }
    ASSERT_TRUE(st.ForwardBatch(items, scratch).ok());
    for (size_t i = 0; i < S; ++i) std::memcpy(last.data() + i * h, hidden[i].data() + hidden[i].size() - h, h * 4);
    st.LogitsBatch(last, logits, scratch);
    for (size_t i = 0; i < S; ++i) {
      ASSERT_EQ(std::memcmp(logits.data() + i * vocab, solo[i].data() + step * vocab, vocab * 4), 0)
          << v.Name() << " session " << i << " step " << step;
    }
  }
}

TEST_F(SyntheticModel, BatchedSessionsEqualSoloRuns) {
  auto model = OpenModelDir(*dir_, ModelPins{});
  ASSERT_TRUE(model.ok());
  for (const Variant& v : AllVariants()) CheckBatchedEqualsSolo(*model, v);
}

// A Qwen3-MoE model with odd sizes (8 experts, top 3, head_dim not
// hidden / heads, an untied head): every variant gives the same logits,
// and batched sessions, whose rows choose different experts, their solo
// runs.
class SyntheticMoe : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(::testing::TempDir() + "/lockstep_ops_synth_moe");
    SyntheticShape s;
    s.hidden = 80, s.layers = 2, s.heads = 5, s.kv_heads = 1, s.head_dim = 18, s.vocab = 301;
    s.untied = true, s.experts = 8, s.top_k = 3, s.moe_inter = 72;
    ASSERT_TRUE(WriteSyntheticModel(*dir_, s, 23, "").ok());
  }
  static std::string* dir_;
};
std::string* SyntheticMoe::dir_ = nullptr;

TEST_F(SyntheticMoe, EveryVariantGivesTheSameLogits) { ExpectEveryVariantGivesTheSameLogits(*dir_); }

TEST_F(SyntheticMoe, BatchedSessionsEqualSoloRuns) {
  auto model = OpenModelDir(*dir_, ModelPins{});
  ASSERT_TRUE(model.ok());
  for (const Variant& v : AllVariants()) CheckBatchedEqualsSolo(*model, v);
}

TEST(StageEquality, BatchedEqualsSoloOnTinyQwen3Moe) {
  if (!std::filesystem::exists(ConformanceDir("tiny-qwen3-moe"))) LOCKSTEP_FIXTURE_ABSENT();
  auto model = OpenModelDir(ConformanceDir("tiny-qwen3-moe"), ModelPins{});
  ASSERT_TRUE(model.ok());
  CheckBatchedEqualsSolo(*model, Variant{ops::AvailableIsas().back(), 2, WeightFormat::kPackedBf16});
}

TEST(StageEquality, BatchedEqualsSoloOnTinyLlama) {
  if (!std::filesystem::exists(ConformanceDir("tiny-llama"))) LOCKSTEP_FIXTURE_ABSENT();
  auto model = OpenModelDir(ConformanceDir("tiny-llama"), ModelPins{});
  ASSERT_TRUE(model.ok());
  CheckBatchedEqualsSolo(*model, Variant{ops::AvailableIsas().back(), 2, WeightFormat::kPackedBf16});
}

TEST_F(SyntheticModel, BatchRejectsABadItemBeforeRunning) {
  auto model = OpenModelDir(*dir_, ModelPins{});
  ASSERT_TRUE(model.ok());
  Loaded l = Load(*model, Variant{});
  KvCache a = l.stage->NewCache(), b = l.stage->NewCache();
  std::vector<float> ha(l.stage->hidden()), hb(l.stage->hidden() + 1);
  ForwardScratch s;
  const Stage::BatchItem items[] = {{ha, 0, &a}, {hb, 0, &b}};
  EXPECT_FALSE(l.stage->ForwardBatch(items, s).ok());
  EXPECT_EQ(a.size(), 0u);
}

}  // namespace
}  // namespace lockstep::testing
