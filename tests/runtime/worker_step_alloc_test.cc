// A worker's decode step allocates nothing: two StageHosts (layers [0,1)
// and [1,2) of tiny-llama, the first and the last stage of a pipeline) run
// a session's decode steps as a worker's compute thread does — the first
// stage embeds the token and marshals a hidden frame, the last chooses the
// token, folds the witness chain and marshals a StepResult (and, relaying,
// the session's next step for the first stage) — into frames from a
// FramePool that the "sender" (this test, as the worker's I/O thread) gives
// back. Parsing the frames on the receiving side stands for the I/O thread
// and is not counted. The tokens and the chain equal a monolithic decode's,
// so the steps counted are real ones. A session forked from a prefix with
// a reserve hint (a served prompt reusing a cached one) allocates nothing
// either.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "engine/decode.h"
#include "engine/local_backend.h"
#include "engine/model_loader.h"
#include "tests/counting_allocator.h"
#include "tests/runtime/stage_host_fixture.h"

namespace lockstep::testing {
namespace {

constexpr uint32_t kSteps = 20;
const std::vector<uint32_t> kPrompt = {1, 2, 3, 4};

class WorkerStepAlloc : public TwoStages {
 protected:
  // Runs `f` counting its allocations into allocs_ when `counted`.
  template <typename F>
  void Count(bool counted, F&& f) {
    g_allocs = 0;
    g_counting = counted;
    f();
    g_counting = false;
    allocs_ += g_allocs.load();
  }
  // The tokens and chain equal the monolithic decode's.
  void ExpectMonolithic(const std::vector<uint32_t>& generated, WitnessChain& chain) {
    Result<OpenModel> model = MapWeights(info_);
    ASSERT_TRUE(model.ok());
    Result<LoadedStage> whole = LoadStage(*model, StageSpec{0, 2, true, true}, ComputeOptions{});
    ASSERT_TRUE(whole.ok());
    LocalBackend backend(**whole);
    DecodeRequest req;
    req.prompt = kPrompt;
    req.gen = kSteps;
    Result<DecodeResult> mono = RunDecode(backend, req, info_.Seed());
    ASSERT_TRUE(mono.ok()) << mono.status().ToString();
    EXPECT_EQ(generated, mono->generated);
    EXPECT_EQ(chain.Finalize(), mono->cis2_ref);
  }

  // kSteps steps of a session, each sent to the first stage by the
  // coordinator with the chain (no relay), the first stage's hidden frame
  // handed to the last; allocations counted from step 2 on (after a
  // prefill and a first decode step). `before(step, input)` runs first at
  // every step. The tokens and chain equal the monolithic decode's.
  void DecodeUnrelayed(const std::function<void(uint32_t, wire::TokenInput&)>& before) {
    WitnessChain chain(info_.Seed(), kPrompt);
    wire::TokenInput in = PromptInput(kPrompt, 0);
    std::vector<uint32_t> generated;
    for (uint32_t step = 0; step < kSteps; ++step) {
      before(step, in);
      in.step = step;
      in.handoff = wire::ChainHandoff{step, chain.Export()};
      const bool counted = step >= 2;
      const wire::Message tokens = in;  // as the I/O thread hands it over
      Count(counted, [&] { first_.Handle(tokens, &out_); });
      const wire::Message hidden = Take(&out_, Outgoing::To::kNextStage, &pool_);
      Count(counted, [&] { last_.Handle(hidden, &out_); });
      const wire::Message reply = Take(&out_, Outgoing::To::kCoordinator, &pool_);
      const auto* r = std::get_if<wire::StepResult>(&reply);
      ASSERT_NE(r, nullptr) << wire::MessageName(reply);
      Result<WitnessChain> next = WitnessChain::Resume(r->chain_state);
      ASSERT_TRUE(next.ok());
      chain = std::move(*next);
      generated.push_back(r->token);
      in.phase = wire::TokenInput::Phase::kDecode;
      in.first_position = static_cast<uint32_t>(kPrompt.size()) + step;
      in.token_ids.assign(1, r->token);
    }
    ExpectMonolithic(generated, chain);
  }

  size_t allocs_ = 0;
};

TEST_F(WorkerStepAlloc, PipelineDecodeStepsAllocateNothing) {
  Open(kSession, static_cast<uint32_t>(kPrompt.size()) + kSteps);
  DecodeUnrelayed([](uint32_t, wire::TokenInput&) {});
  EXPECT_EQ(allocs_, 0u) << "allocations in " << kSteps - 2 << " decode steps of two stages";
}

// A session forked from a cached prefix (a served prompt that shares one)
// decodes as one opened for its whole request: the Fork's reserve hint
// gives the copy room for every position it reaches.
TEST_F(WorkerStepAlloc, DecodeStepsOfAForkedSessionAllocateNothing) {
  constexpr uint64_t kFork = kSession + 1;
  Open(kSession, static_cast<uint32_t>(kPrompt.size()));  // the prefix alone
  DecodeUnrelayed([&](uint32_t step, wire::TokenInput& in) {
    if (step != 1) return;
    const wire::Message fork =
        wire::Fork{kFork, kSession, static_cast<uint32_t>(kPrompt.size()) + kSteps};
    first_.Handle(fork, &out_);
    last_.Handle(Take(&out_, Outgoing::To::kNextStage, &pool_), &out_);
    ASSERT_TRUE(out_.empty());
    in.session_id = kFork;
  });
  EXPECT_EQ(allocs_, 0u) << "allocations in " << kSteps - 2 << " decode steps of a fork";
}

// The coordinator sends the prompt once, asking for every later step to be
// relayed: the last stage hands the first each next step itself.
TEST_F(WorkerStepAlloc, RelayedDecodeStepsAllocateNothing) {
  Open(kSession, static_cast<uint32_t>(kPrompt.size()) + kSteps);
  WitnessChain chain(info_.Seed(), kPrompt);
  wire::Message tokens = PromptInput(kPrompt, kSteps - 1);
  std::vector<uint32_t> generated;
  for (uint32_t step = 0; step < kSteps; ++step) {
    const bool counted = step >= 2;  // after a prefill and a first decode step
    Count(counted, [&] { first_.Handle(tokens, &out_); });
    const wire::Message hidden = Take(&out_, Outgoing::To::kNextStage, &pool_);
    Count(counted, [&] { last_.Handle(hidden, &out_); });
    ASSERT_EQ(out_.size(), step + 1 < kSteps ? 2u : 1u);
    // The next step goes out before the StepResult: it is what is awaited.
    if (step + 1 < kSteps) {
      EXPECT_EQ(out_[0].to, Outgoing::To::kFirstStage);
    }
    std::vector<wire::Message> relayed = TakeAll(&out_, Outgoing::To::kFirstStage, &pool_);
    const wire::Message reply = TakeAll(&out_, Outgoing::To::kCoordinator, &pool_).at(0);
    const auto* r = std::get_if<wire::StepResult>(&reply);
    ASSERT_NE(r, nullptr) << wire::MessageName(reply);
    EXPECT_EQ(r->step, step);
    Result<WitnessChain> next = WitnessChain::Resume(r->chain_state);
    ASSERT_TRUE(next.ok());
    chain = std::move(*next);
    generated.push_back(r->token);
    if (step + 1 == kSteps) break;
    ASSERT_EQ(relayed.size(), 1u);
    const auto& t = std::get<wire::TokenInput>(relayed[0]);
    EXPECT_TRUE(t.relayed);
    EXPECT_EQ(t.step, step + 1);
    EXPECT_EQ(t.token_ids, std::vector<uint32_t>{r->token});
    EXPECT_EQ(t.handoff->decode_step, step + 1);
    EXPECT_EQ(t.handoff->relay, kSteps - 2 - step);
    EXPECT_EQ(t.handoff->chain_state.bytes, r->chain_state.bytes);
    tokens = std::move(relayed[0]);
  }
  EXPECT_EQ(allocs_, 0u) << "allocations in " << kSteps - 2 << " relayed steps of two stages";
  ExpectMonolithic(generated, chain);
}

}  // namespace
}  // namespace lockstep::testing
