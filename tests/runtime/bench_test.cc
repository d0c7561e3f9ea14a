// lockstep bench's batched figure: S sessions decoded as one batch
// (ForwardBatch, LogitsBatch, then every session's choice at once, as the
// server's scheduler makes it) equal the same sessions decoded one by one
// — tokens, witness chain and last logits digest — and every figure is
// measured; the weights are named by the types they are held in.
#include <gtest/gtest.h>

#include <string>

#include "cli_runner.h"
#include "engine/io/synthetic_gguf.h"
#include "engine/ops/fp_env.h"
#include "runtime/bench.h"
#include "runtime_test_util.h"

namespace lockstep {
namespace {

TEST(Bench, BatchedSessionsEqualTheirSoloTwins) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());  // the caller computes too
  runtime::BenchOptions o;
  o.model_dir = testing::MakeModel("bench", 2, 17);
  o.sessions = 3;
  o.prompt_len = 5;
  o.decode_prompt_len = 3;
  o.gen = 6;
  o.repeats = 1;
  for (int threads : {1, 2}) {
    o.compute.threads = threads;
    const Result<runtime::BenchFigures> f = runtime::RunBench(o);
    ASSERT_TRUE(f.ok()) << f.status().ToString();
    EXPECT_TRUE(f->batched_equals_solo) << threads << " threads";
    EXPECT_GT(f->batched_tok_s, 0);
    EXPECT_GT(f->solo_tok_s, 0);
    EXPECT_GT(f->decode_tok_s, 0);
    EXPECT_GT(f->prefill_tok_s, 0);
    EXPECT_GT(f->stream_read_gb_s, 0);
    EXPECT_EQ(f->weights, "bf16") << "a BF16 folder";
  }
}

// A GGUF file's matrices are named by the file's types (what a Q4_K_M
// file's writer gives them: Q4_K, with Q6_K for the head, attn_v and
// ffn_down of some layers), not by the --weights option; widened, "f32".
TEST(Bench, NamesTheTypesTheWeightsAreHeldIn) {
  SyntheticShape s;
  s.hidden = 256, s.layers = 3, s.heads = 4, s.kv_heads = 2, s.inter = 512, s.vocab = 300;
  auto cfg = ParseModelConfig(SyntheticConfigJson(s), "shape");
  ASSERT_TRUE(cfg.ok()) << cfg.status().ToString();
  const StageSpec all{0, s.layers, true, true};
  for (auto [quant, want] : {std::pair<const char*, const char*>{"q8_0", "q8_0"},
                             {"q4_k_m", "q4_k+q6_k"},
                             {"bf16", "bf16"}}) {
    SCOPED_TRACE(quant);
    const std::string path = testing::MakeTempDir(std::string("bench_types_") + quant) + "/model.gguf";
    const Status st = WriteSyntheticGguf(path, *cfg, false, *GgufQuantMixByName(quant), 5, {});
    ASSERT_TRUE(st.ok()) << st.ToString();
    auto model = OpenModelDir(path, ModelPins{});
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    EXPECT_EQ(runtime::HeldWeightTypes(*model, all, WeightFormat::kPackedBf16), want);
    EXPECT_EQ(runtime::HeldWeightTypes(*model, all, WeightFormat::kPackedF32), "f32");
  }
}

TEST(Bench, RefusesTooFewTokens) {
  runtime::BenchOptions o;
  o.model_dir = testing::MakeModel("bench_refuse", 1, 3);
  o.gen = 1;
  const Result<runtime::BenchFigures> f = runtime::RunBench(o);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().ToString().find("--gen >= 2"), std::string::npos) << f.status().ToString();
}

}  // namespace
}  // namespace lockstep
