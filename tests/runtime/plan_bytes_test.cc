// Plans that balance bytes: what a model's parts weigh comes from its
// checkpoint's tensor infos (a MoE token reads the router and k experts,
// not all; an f32 tensor weighs twice a bf16 one), the automatic plan
// balances those bytes (optionally with per-token work), and a worker's
// weight budget refuses an assignment that does not fit, by name, before
// loading.
#include <gtest/gtest.h>

#include "engine/io/safetensors.h"
#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"

namespace lockstep::testing {
namespace {

SyntheticShape Moe() {
  SyntheticShape s;
  s.hidden = 64, s.layers = 4, s.heads = 4, s.kv_heads = 2, s.head_dim = 24, s.vocab = 320;
  s.untied = true, s.experts = 6, s.top_k = 2, s.moe_inter = 40;
  return s;
}

Result<ModelBytes> Measure(const std::string& dir) {
  LOCKSTEP_ASSIGN_OR_RETURN(ModelInfo info, InspectModelDir(dir, ModelPins{}));
  return MeasureModelBytes(info.files, info.config);
}

TEST(PlanBytes, AMoeLayerWeighsAllItsExpertsAndATokenReadsK) {
  const SyntheticShape s = Moe();
  auto bytes = Measure(MakeModel("bytes-moe", s, 3));
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  // bf16: 2 bytes an element, counted here from the shape.
  const uint64_t h = 64, q = 4 * 24, kv = 2 * 24, inter = 40, e = 6, k = 2, vocab = 320;
  const uint64_t attention = 2 * (2 * h + 2 * 24 + q * h + 2 * kv * h + h * q);  // norms too
  const uint64_t expert = 2 * 3 * inter * h, router = 2 * e * h;
  ASSERT_EQ(bytes->layers.size(), 4u);
  for (const PartBytes& l : bytes->layers) {
    EXPECT_EQ(l.resident, attention + router + e * expert);
    EXPECT_EQ(l.per_token, attention + router + k * expert);
  }
  EXPECT_EQ(bytes->first.resident, 2 * vocab * h);
  EXPECT_EQ(bytes->first.per_token, 2 * h);  // one row
  EXPECT_EQ(bytes->last.resident, 2 * (vocab * h + h));
  const PartBytes all = bytes->Stage(StageSpec{0, 4, true, true});
  EXPECT_EQ(all.resident, 4 * (attention + router + e * expert) + 2 * vocab * h + 2 * (vocab * h + h));
}

// Layers 0 and 1 of 6 rewritten as f32: each weighs twice a bf16 layer,
// so the plan over two workers gives them a stage of their own (equal
// layer counts would cut at 3).
TEST(PlanBytes, TheAutomaticPlanTakesTheCheckpointsOwnSizes) {
  SyntheticShape s;
  s.layers = 6, s.vocab = 64;
  const std::string dir = MakeModel("bytes-f32", s, 5);
  auto f = SafetensorsFile::Open(dir + "/model.safetensors");
  ASSERT_TRUE(f.ok());
  SafetensorsWriter w;
  for (const TensorInfo& t : f->tensors()) {
    std::vector<uint8_t> bytes = *f->ReadBytes(t);
    const bool widen = t.name.starts_with("model.layers.0.") || t.name.starts_with("model.layers.1.");
    if (!widen) {
      w.Add(t.name, t.dtype, t.shape, std::move(bytes));
      continue;
    }
    std::vector<uint8_t> wide(bytes.size() * 2, 0);  // bf16 -> f32: the bits shifted up, exactly
    for (size_t i = 0; i < bytes.size() / 2; ++i) {
      wide[4 * i + 2] = bytes[2 * i];
      wide[4 * i + 3] = bytes[2 * i + 1];
    }
    w.Add(t.name, DType::kF32, t.shape, std::move(wide));
  }
  ASSERT_TRUE(w.WriteFile(dir + "/model.safetensors").ok());
  auto bytes = Measure(dir);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(bytes->layers[0].resident, 2 * bytes->layers[2].resident);
  EXPECT_EQ(AutoPlan(*bytes, 2, PlanBalance::kMemory), (std::vector<LayerRange>{{0, 2}, {2, 6}}));
  // And that plan runs, bit for bit as one process.
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  InProcCluster cluster(2);
  auto c = Coordinator::Start(cluster.context(), cluster.Config(dir, {}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ((*c)->plan_text(), "0:2,2:6");
  DecodeRequest req;
  req.prompt = {1, 2, 3};
  req.gen = 5;
  auto session = (*c)->OpenSession(std::nullopt);
  ASSERT_TRUE(session.ok());
  auto r = RunDecode(**session, req, (*c)->seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, Monolithic(dir, req));
}

ModelBytes Uniform(size_t layers, uint64_t layer, PartBytes first, PartBytes last) {
  ModelBytes b;
  b.layers.assign(layers, PartBytes{layer, layer});
  b.first = first;
  b.last = last;
  return b;
}

TEST(PlanBytes, HeavyLayersGetAStageOfTheirOwn) {
  ModelBytes b = Uniform(8, 10, {}, {});
  b.layers[6] = b.layers[7] = PartBytes{40, 40};
  // Equal layer counts (0:4,4:8) would put 100 bytes on the second stage.
  EXPECT_EQ(AutoPlan(b, 2, PlanBalance::kMemory), (std::vector<LayerRange>{{0, 6}, {6, 8}}));
}

TEST(PlanBytes, WorkMovesLayersOffTheLastStage) {
  // A tied head: the last stage holds the embedding again and reads all of
  // it per token, the first reads one row.
  const uint64_t table = 4 * 10;
  const ModelBytes b = Uniform(30, 10, {table, 1}, {table + 1, table + 1});
  for (size_t n = 1; n <= 30; ++n) {
    for (PlanBalance balance : {PlanBalance::kMemory, PlanBalance::kMemoryAndWork}) {
      const auto plan = AutoPlan(b, n, balance);
      EXPECT_TRUE(ValidatePlan(plan, 30, n).ok()) << PlanText(plan);
    }
  }
  auto size = [](const LayerRange& r) { return r.hi - r.lo; };
  const auto memory = AutoPlan(b, 3, PlanBalance::kMemory);
  EXPECT_LE(std::abs(size(memory[0]) - size(memory[2])), 1) << PlanText(memory);
  const auto work = AutoPlan(b, 3, PlanBalance::kMemoryAndWork);
  EXPECT_GT(size(work[0]), size(work[2])) << PlanText(work);
}

TEST(PlanBytes, AWorkerRefusesAStageOverItsWeightBudgetByName) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string dir = MakeModel("bytes-budget", Moe(), 7);
  auto bytes = Measure(dir);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  const uint64_t need = bytes->Stage(StageSpec{2, 4, false, true}).resident;
  for (const uint64_t budget : {need - 1, need}) {
    SCOPED_TRACE("budget " + std::to_string(budget) + " for " + std::to_string(need));
    InProcCluster cluster(2, [&](size_t i, WorkerOptions& o) {
      o.name = "w" + std::to_string(i);
      if (i == 1) o.limits.weight_bytes_per_worker = budget;
    });
    auto c = Coordinator::Start(cluster.context(), cluster.Config(dir, {{0, 2}, {2, 4}}));
    if (budget >= need) {
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      continue;
    }
    ASSERT_FALSE(c.ok());
    const std::string m = c.status().message();
    EXPECT_NE(m.find("limit weight_bytes_per_worker (--memory-budget)"), std::string::npos) << m;
    EXPECT_NE(m.find("layers [2,4) on worker w1 asks for " + std::to_string(need)),
              std::string::npos)
        << m;
  }
}

}  // namespace
}  // namespace lockstep::testing
