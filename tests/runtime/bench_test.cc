// lockstep bench's batched figure: S sessions decoded as one batch
// (ForwardBatch, LogitsBatch, then every session's choice at once, as the
// server's scheduler makes it) equal the same sessions decoded one by one
// — tokens, witness chain and last logits digest — and every figure is
// measured.
#include <gtest/gtest.h>

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
