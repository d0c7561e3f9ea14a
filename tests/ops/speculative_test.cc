// Exact speculative decoding (engine/speculative.h): the result equals
// plain decoding's bit for bit (tokens, every step's logits sha256 and
// layer digests, chain, argmax digest) for greedy, sampled, windowed,
// evicting, long and traced decodes, on the scalar and dispatched kernels,
// 1 and 2 threads, with 1 to 8 proposals per step; proposals are both kept
// and rejected along the way, so both the kept rows and the evicted tail
// are exercised. And the prompt-lookup proposer on its own.
#include <gtest/gtest.h>

#include "decode_cases.h"
#include "engine/io/synthetic_model.h"
#include "engine/proposer.h"
#include "engine/speculative.h"
#include "model_fixture.h"

namespace lockstep::testing {
namespace {

TEST(Speculative, EqualsPlainDecodingOnEveryKindOfDecode) {
  const std::string dir = FreshPath("speculative");
  SyntheticShape s = SmallUntiedShape();
  s.vocab = 300;
  ASSERT_TRUE(WriteSyntheticModel(dir, s, 11, "").ok());
  auto model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok());
  SpeculativeStats total;
  for (const Variant& v : {Variant{}, Variant{"auto", 2, WeightFormat::kPackedBf16}}) {
    Loaded l = Load(*model, v);
    for (const DecodeCase& c : DecodeCases()) {
      auto plain = RunDecode(*OpenBackend(*l.stage, c), c.req, model->Seed());
      ASSERT_TRUE(plain.ok()) << plain.status().ToString();
      for (uint32_t k : {1u, 4u, 8u}) {
        SCOPED_TRACE(v.Name() + " " + c.name + " k=" + std::to_string(k));
        SpeculativeStats stats;
        auto spec = RunSpeculativeDecode(*OpenBackend(*l.stage, c), c.req, model->Seed(),
                                         SpeculativeOptions{k, 3}, &stats);
        ASSERT_TRUE(spec.ok()) << spec.status().ToString();
        ExpectSameResult(*spec, *plain);
        total.proposed += stats.proposed;
        total.accepted += stats.accepted;
      }
    }
  }
  EXPECT_GT(total.accepted, 0u);               // rows kept
  EXPECT_GT(total.proposed, total.accepted);   // and rows evicted
}

TEST(Proposer, ProposesWhatFollowedTheLongestRecentSuffix) {
  std::vector<uint32_t> out;
  // "1 2 3 9 ... 1 2 3": the 3-gram "1 2 3" occurred, followed by 9 7.
  ProposeByLookup(std::vector<uint32_t>{1, 2, 3, 9, 7, 5, 1, 2, 3}, 2, 3, &out);
  EXPECT_EQ(out, (std::vector<uint32_t>{9, 7}));
  // The most recent occurrence wins; a short cycle repeats itself.
  ProposeByLookup(std::vector<uint32_t>{4, 5, 8, 4, 5, 6, 4, 5}, 5, 2, &out);
  EXPECT_EQ(out, (std::vector<uint32_t>{6, 4, 5, 6, 4}));
  // Only a 1-gram matches: what followed its last earlier occurrence.
  ProposeByLookup(std::vector<uint32_t>{7, 1, 7, 2, 3, 7}, 3, 3, &out);
  EXPECT_EQ(out, (std::vector<uint32_t>{2, 3, 7}));
  // Nothing occurs earlier: no proposal.
  ProposeByLookup(std::vector<uint32_t>{1, 2, 3}, 4, 3, &out);
  EXPECT_TRUE(out.empty());
  ProposeByLookup(std::vector<uint32_t>{}, 4, 3, &out);
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace lockstep::testing
