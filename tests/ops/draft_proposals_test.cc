// Draft-model proposals (engine/draft_proposals.h) for exact speculative
// decoding: the result equals plain decoding's bit for bit on every kind
// of decode, with a smaller draft and with the model as its own draft; the
// model as its own greedy draft has every proposal kept (so the draft's
// guesses are what the speculator feeds); a draft whose cache is rolled
// back proposes what a fresh draft proposes on the same history, and
// that is the draft's own greedy decode; a history at the draft's max
// positions gets no guess. And the tokenizer check a draft must pass
// (engine/same_tokenizer.h).
#include <gtest/gtest.h>

#include "decode_cases.h"
#include "engine/draft_proposals.h"
#include "engine/io/synthetic_model.h"
#include "engine/ops/kernels.h"
#include "engine/same_tokenizer.h"
#include "engine/speculative.h"
#include "model_fixture.h"

namespace lockstep::testing {
namespace {

Result<OpenModel> ModelOfShape(const std::string& name, const SyntheticShape& s, uint64_t seed) {
  const std::string dir = FreshPath(name);
  LOCKSTEP_RETURN_IF_ERROR(WriteSyntheticModel(dir, s, seed, ""));
  return OpenModelDir(dir, ModelPins{});
}

// The target: the speculative tests' small model (300-token vocabulary).
Result<OpenModel> TargetModel() {
  SyntheticShape s = SmallUntiedShape();
  s.vocab = 300;
  return ModelOfShape("draft_target", s, 11);
}

// A smaller draft with the same vocabulary: fewer layers, narrower.
Result<OpenModel> SmallDraftModel() {
  SyntheticShape s;
  s.hidden = 32, s.layers = 1, s.heads = 2, s.kv_heads = 1, s.inter = 48, s.vocab = 300;
  return ModelOfShape("draft_small", s, 11);
}

std::unique_ptr<DraftProposals> DraftFor(const Stage& draft, const DecodeCase& c) {
  return std::make_unique<DraftProposals>(draft, 0, c.req.prompt.size() + c.req.gen + 8);
}

TEST(DraftSpeculative, EqualsPlainDecodingWithASmallerDraftOrTheModelItself) {
  Result<OpenModel> target = TargetModel();
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  Result<OpenModel> small = SmallDraftModel();
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  Loaded t = Load(*target, Variant{});
  Loaded d = Load(*small, Variant{});
  SpeculativeStats total;
  for (const Stage* draft : {&*d, &*t}) {
    for (const DecodeCase& c : DecodeCases()) {
      SCOPED_TRACE(c.name + (draft == &*t ? " self-draft" : " small draft"));
      ExpectSpeculativeEqualsPlain(*t, c, target->Seed(), SpeculativeOptions{4, 3}, DraftFor(*draft, c),
                                   &total);
    }
  }
  EXPECT_GT(total.accepted, 0u);              // rows kept
  EXPECT_GT(total.proposed, total.accepted);  // and rows evicted
}

// Greedy, no window or eviction: the model's own greedy guesses are its
// choices, so every proposal is kept and fewer passes than steps run. A
// speculator that ignored the draft (prompt lookup) would miss some.
TEST(DraftSpeculative, TheModelAsItsOwnGreedyDraftHasEveryProposalKept) {
  Result<OpenModel> target = TargetModel();
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  Loaded t = Load(*target, Variant{});
  for (const DecodeCase& c : DecodeCases()) {
    if (c.name != "greedy" && c.name != "repeating" && c.name != "long") continue;
    SCOPED_TRACE(c.name);
    SpeculativeStats stats;
    auto spec = RunSpeculativeDecode(*OpenBackend(*t, c), c.req, target->Seed(),
                                     SpeculativeOptions{6, 3}, &stats, DraftFor(*t, c));
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_GT(stats.proposed, 0u);
    EXPECT_EQ(stats.accepted, stats.proposed);
    EXPECT_LT(stats.passes, c.req.gen / 2);
    auto plain = RunDecode(*OpenBackend(*t, c), c.req, target->Seed());
    ASSERT_TRUE(plain.ok()) << plain.status().ToString();
    ExpectSameResult(*spec, *plain);
  }
}

// The draft's greedy continuation of `history`, computed by feeding it
// whole into a fresh cache and then one token at a time.
std::vector<uint32_t> GreedyContinuation(const Stage& stage, const std::vector<uint32_t>& history,
                                         size_t n) {
  const std::vector<float> logits = DecodeLogits(stage, history, n);
  std::vector<uint32_t> out;
  const size_t vocab = stage.vocab();
  for (size_t i = 0; i * vocab < logits.size(); ++i) {
    out.push_back(ops::ArgmaxFirst(logits.data() + i * vocab, vocab));
  }
  return out;
}

TEST(DraftProposals, ARolledBackDraftProposesTheDraftsGreedyContinuation) {
  Result<OpenModel> small = SmallDraftModel();
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  Loaded d = Load(*small, Variant{});
  DraftProposals draft(*d, 0);
  std::vector<uint32_t> out;
  const std::vector<std::vector<uint32_t>> histories = {
      {5, 9, 2, 7},
      {5, 9, 2, 7, 11, 12},        // extends it: caught up in one feed
      {5, 9, 2, 40},               // rewrites the tail: rolled back
      {5, 9, 2, 40},               // the same again: the last token fed again
      {6},                         // nothing in common
      {6, 200, 201, 202, 203, 204, 205, 1, 2, 3},
  };
  for (const auto& h : histories) {
    SCOPED_TRACE(h.size());
    ASSERT_TRUE(draft.Propose(h, 5, &out).ok());
    EXPECT_EQ(out, GreedyContinuation(*d, h, 5));
    DraftProposals fresh(*d, 0);
    std::vector<uint32_t> again;
    ASSERT_TRUE(fresh.Propose(h, 5, &again).ok());
    EXPECT_EQ(out, again);
    // The cache holds the history and every guess but the last.
    std::vector<uint32_t> held = h;
    held.insert(held.end(), out.begin(), out.end() - 1);
    EXPECT_EQ(std::vector<uint32_t>(draft.cached().begin(), draft.cached().end()), held);
  }
}

TEST(DraftProposals, NoGuessPastTheDraftsMaxPositions) {
  Result<OpenModel> small = SmallDraftModel();
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  Loaded d = Load(*small, Variant{});
  const std::vector<uint32_t> history = {1, 2, 3, 4, 5, 6};
  std::vector<uint32_t> out = {99};
  DraftProposals full(*d, 6);
  ASSERT_TRUE(full.Propose(history, 4, &out).ok());
  EXPECT_TRUE(out.empty());
  DraftProposals two_left(*d, 8);
  ASSERT_TRUE(two_left.Propose(history, 4, &out).ok());
  EXPECT_EQ(out, GreedyContinuation(*d, history, 2));
  EXPECT_LE(two_left.cached().size(), 8u);
}

TokenizerIdentity Identity(const std::string& model, bool gguf, uint8_t digest_byte, int vocab,
                           std::vector<uint32_t> eos) {
  TokenizerIdentity t{model, gguf, Digest{}, vocab, std::move(eos)};
  t.tokenizer_json.fill(digest_byte);
  return t;
}

TEST(SameTokenizer, RefusesAnotherVocabularyEosOrTokenizerJsonNamingBothModels) {
  const TokenizerIdentity target = Identity("/m/target", false, 1, 300, {2});
  EXPECT_TRUE(CheckSameTokenizer(target, Identity("/m/draft", false, 1, 300, {2})).ok());
  struct Case {
    TokenizerIdentity draft;
    std::string says;
  };
  const std::vector<Case> cases = {
      {Identity("/m/draft", false, 1, 200, {2}), "vocabulary size (200 vs 300 tokens)"},
      {Identity("/m/draft", false, 1, 300, {3}), "end-of-sequence ids ([3] vs [2])"},
      {Identity("/m/draft", false, 7, 300, {2}), "tokenizer.json"},
      {Identity("/m/draft.gguf", true, 7, 200, {2}), "vocabulary size"},
  };
  for (const Case& c : cases) {
    const Status st = CheckSameTokenizer(target, c.draft);
    SCOPED_TRACE(st.ToString());
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(c.says), std::string::npos);
    EXPECT_NE(st.message().find(c.draft.model), std::string::npos);
    EXPECT_NE(st.message().find("/m/target"), std::string::npos);
  }
  // A .gguf's tokenizer has no digest apart from the file's: vocabulary
  // size and end-of-sequence ids decide.
  EXPECT_TRUE(CheckSameTokenizer(target, Identity("/m/draft.gguf", true, 7, 300, {2})).ok());
  // A model that names no end-of-sequence id has none to compare.
  EXPECT_TRUE(CheckSameTokenizer(target, Identity("/m/draft.gguf", true, 7, 300, {})).ok());
  EXPECT_FALSE(CheckSameTokenizer(target, Identity("/m/draft.gguf", true, 7, 300, {2, 5})).ok());
}

}  // namespace
}  // namespace lockstep::testing
