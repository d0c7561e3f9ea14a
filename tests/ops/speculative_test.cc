// Exact speculative decoding (engine/speculative.h): the result equals
// plain decoding's bit for bit (tokens, every step's logits sha256 and
// layer digests, chain, argmax digest) for greedy, sampled, windowed,
// evicting, long and traced decodes, on the scalar and dispatched kernels,
// 1 and 2 threads, with 1 to 8 proposals per step; proposals are both kept
// and rejected along the way, so both the kept rows and the evicted tail
// are exercised. Steps backing off from proposals are promised to the
// backend as chained steps, and the promise is kept. And the prompt-lookup
// proposer on its own.
#include <gtest/gtest.h>

#include "decode_cases.h"
#include "engine/io/synthetic_model.h"
#include "engine/proposer.h"
#include "engine/speculative.h"
#include "model_fixture.h"

namespace lockstep::testing {
namespace {

// A seeded small untied model with a 300-token vocabulary in a fresh folder.
Result<OpenModel> SmallModel(const std::string& name) {
  const std::string dir = FreshPath(name);
  SyntheticShape s = SmallUntiedShape();
  s.vocab = 300;
  LOCKSTEP_RETURN_IF_ERROR(WriteSyntheticModel(dir, s, 11, ""));
  return OpenModelDir(dir, ModelPins{});
}

TEST(Speculative, EqualsPlainDecodingOnEveryKindOfDecode) {
  Result<OpenModel> model = SmallModel("speculative");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  SpeculativeStats total;
  for (const Variant& v : {Variant{}, Variant{"auto", 2, WeightFormat::kPackedBf16}}) {
    Loaded l = Load(*model, v);
    for (const DecodeCase& c : DecodeCases()) {
      for (uint32_t k : {1u, 4u, 8u}) {
        SCOPED_TRACE(v.Name() + " " + c.name + " k=" + std::to_string(k));
        ExpectSpeculativeEqualsPlain(*l.stage, c, model->Seed(), SpeculativeOptions{k, 3}, nullptr, &total);
      }
    }
  }
  EXPECT_GT(total.accepted, 0u);               // rows kept
  EXPECT_GT(total.proposed, total.accepted);   // and rows evicted
}

// Forwards to `inner` and checks StepBackend::ExpectChainedSteps' promise:
// after ExpectChainedSteps(n), the next FeedAndChoose and the n after it
// feed, each, the one token the call before returned, nothing in between.
class PromiseChecker final : public StepBackend {
 public:
  explicit PromiseChecker(StepBackend& inner) : inner_(inner) {}
  Status Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) override {
    Break("Feed");
    return inner_.Feed(tokens, logits);
  }
  Result<StepOutcome> FeedAndChoose(std::span<const uint32_t> tokens,
                                    const StepContext& ctx) override {
    if (left_ > 0 && !first_ && (tokens.size() != 1 || tokens[0] != last_)) Break("another token");
    Result<StepOutcome> o = inner_.FeedAndChoose(tokens, ctx);
    if (o.ok()) last_ = o->token;
    if (left_ > 0 && !first_) --left_;
    first_ = false;
    return o;
  }
  Status FeedRows(std::span<const uint32_t> tokens, uint32_t rows, const StepContext& ctx,
                  RowSteps* out) override {
    Break("FeedRows");
    return inner_.FeedRows(tokens, rows, ctx, out);
  }
  Status Evict(uint32_t from, uint32_t count) override {
    Break("Evict");
    return inner_.Evict(from, count);
  }
  void ExpectChainedSteps(uint32_t steps) override {
    Break("a new promise");
    left_ = steps;
    first_ = true;
    promised += steps;
  }
  uint32_t CacheLength() const override { return inner_.CacheLength(); }
  std::span<const Digest> StepTrace() const override { return inner_.StepTrace(); }

  uint64_t promised = 0;         // chained steps promised in all
  std::vector<std::string> broken;  // what broke a promise, in order

 private:
  void Break(const char* what) {
    if (left_ > 0) broken.push_back(std::string(what) + " with " + std::to_string(left_) + " steps promised");
    left_ = 0;
  }
  StepBackend& inner_;
  uint32_t left_ = 0, last_ = 0;
  bool first_ = false;
};

// Steps that back off from proposing are promised to the backend as a run
// (so a pipeline relays them), and every promise is kept: the promised
// steps are plain steps feeding the token chosen before them.
TEST(Speculative, BackoffRunsArePromisedChainedStepsAndKeepThem) {
  Result<OpenModel> model = SmallModel("speculative_promise");
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  Loaded l = Load(*model, Variant{});
  uint64_t promised = 0;
  for (const DecodeCase& c : DecodeCases()) {
    SCOPED_TRACE(c.name);
    auto plain = RunDecode(*OpenBackend(*l.stage, c), c.req, model->Seed());
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    auto local = OpenBackend(*l.stage, c);
    PromiseChecker checker(*local);
    auto spec = RunSpeculativeDecode(checker, c.req, model->Seed(), SpeculativeOptions{4, 3}, nullptr);
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    ExpectSameResult(*spec, *plain);
    EXPECT_TRUE(checker.broken.empty()) << checker.broken.front();
    promised += checker.promised;
  }
  EXPECT_GT(promised, 0u);  // some backoff ran, and was promised
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
