// A worker's decode step allocates nothing: two StageHosts (layers [0,1)
// and [1,2) of tiny-llama, the first and the last stage of a pipeline) run
// a session's decode steps as a worker's compute thread does — the first
// stage embeds the token and marshals a hidden frame, the last chooses the
// token, folds the witness chain and marshals a StepResult — into frames
// from a FramePool that the "sender" (this test, as the worker's I/O
// thread) gives back. Parsing the frames on the receiving side stands for
// the I/O thread and is not counted. The tokens and the chain equal a
// monolithic decode's, so the steps counted are real ones.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "engine/decode.h"
#include "engine/local_backend.h"
#include "engine/model_loader.h"
#include "engine/ops/fp_env.h"
#include "tests/counting_allocator.h"
#include "tests/fixture_absent.h"
#include "wire/frame_pool.h"
#include "wire/messages.h"
#include "worker/stage_host.h"

namespace lockstep {
namespace {

std::string TinyLlama() {
  return std::string(LOCKSTEP_SHARED_DIR) + "/fixtures/conformance/tiny-llama";
}

wire::Assign StageAssign(const ModelInfo& m, uint32_t lo, uint32_t hi, bool first, bool last,
                         uint32_t index) {
  wire::Assign a;
  a.model_dir = m.files.dir;
  a.expected_weights_sha256 = m.hashes.weights;
  a.expected_config_sha256 = m.hashes.config;
  a.expected_tokenizer_sha256 = m.hashes.tokenizer;
  a.layer_lo = lo;
  a.layer_hi = hi;
  a.is_first = first;
  a.is_last = last;
  a.next_hop = last ? "" : "tcp://127.0.0.1:1";  // never connected: frames are handed over here
  a.worker_index = index;
  return a;
}

// The one message of `out` bound for `to`, parsed (as the receiver's I/O
// thread would); every frame goes back to `pool` (as the sender's would).
wire::Message Take(std::vector<Outgoing>* out, Outgoing::To to, wire::FramePool* pool) {
  EXPECT_EQ(out->size(), 1u);
  wire::Message m = wire::ErrorReport{ErrorKind::kInternal, "no message", false, 0};
  for (Outgoing& o : *out) {
    if (o.to == to) {
      Result<wire::Message> parsed = wire::ParseMessage(o.frame);
      EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
      if (parsed.ok()) m = std::move(*parsed);
    }
    pool->Give(std::move(o.frame));
  }
  out->clear();
  if (auto* e = std::get_if<wire::ErrorReport>(&m)) ADD_FAILURE() << e->message;
  return m;
}

TEST(WorkerStepAlloc, PipelineDecodeStepsAllocateNothing) {
  if (!std::filesystem::exists(TinyLlama())) LOCKSTEP_FIXTURE_ABSENT() << TinyLlama();
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  Result<ModelInfo> info = InspectModelDir(TinyLlama(), ModelPins{});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  ASSERT_EQ(info->config.num_layers, 2);

  const std::vector<uint32_t> prompt = {1, 2, 3, 4};
  const uint32_t steps = 20;
  wire::FramePool pool;
  StageHost first("first", ComputeOptions{}), last("last", ComputeOptions{});
  first.set_frame_pool(&pool);
  last.set_frame_pool(&pool);
  std::vector<Outgoing> out;
  out.reserve(8);
  first.Handle(StageAssign(*info, 0, 1, true, false, 0), &out);
  last.Handle(StageAssign(*info, 1, 2, false, true, 1), &out);
  for (const Outgoing& o : out) {
    auto m = wire::ParseMessage(o.frame);
    ASSERT_TRUE(!m.ok() || !std::holds_alternative<wire::ErrorReport>(*m))
        << std::get<wire::ErrorReport>(*m).message;
  }
  out.clear();

  wire::SessionOpen open;
  open.session_id = 7;
  open.reserve_positions = static_cast<uint32_t>(prompt.size()) + steps;
  first.Handle(open, &out);
  last.Handle(Take(&out, Outgoing::To::kNextStage, &pool), &out);
  ASSERT_TRUE(out.empty());

  // Every step: tokens to the first stage, its hidden frame to the last.
  WitnessChain chain(info->Seed(), prompt);
  wire::TokenInput in;
  in.session_id = open.session_id;
  in.token_ids = prompt;
  in.phase = wire::TokenInput::Phase::kPrefill;
  std::vector<uint32_t> generated;
  size_t allocs = 0;
  for (uint32_t step = 0; step < steps; ++step) {
    in.step = step;
    in.handoff = wire::ChainHandoff{step, chain.Export()};
    const bool counted = step >= 2;  // after a prefill and a first decode step
    const wire::Message tokens = in;  // as the I/O thread hands it over
    g_allocs = 0;
    g_counting = counted;
    first.Handle(tokens, &out);
    g_counting = false;
    allocs += g_allocs.load();
    const wire::Message hidden = Take(&out, Outgoing::To::kNextStage, &pool);
    g_allocs = 0;
    g_counting = counted;
    last.Handle(hidden, &out);
    g_counting = false;
    allocs += g_allocs.load();
    const wire::Message reply = Take(&out, Outgoing::To::kCoordinator, &pool);
    const auto* r = std::get_if<wire::StepResult>(&reply);
    ASSERT_NE(r, nullptr) << wire::MessageName(reply);
    Result<WitnessChain> next = WitnessChain::Resume(r->chain_state);
    ASSERT_TRUE(next.ok());
    chain = std::move(*next);
    generated.push_back(r->token);
    in.phase = wire::TokenInput::Phase::kDecode;
    in.first_position = static_cast<uint32_t>(prompt.size()) + step;
    in.token_ids.assign(1, r->token);
  }
  EXPECT_EQ(allocs, 0u) << "allocations in " << steps - 2 << " decode steps of two stages";

  // The same steps monolithically: the same tokens and witness chain.
  Result<OpenModel> model = MapWeights(*info);
  ASSERT_TRUE(model.ok());
  Result<LoadedStage> whole = LoadStage(*model, StageSpec{0, 2, true, true}, ComputeOptions{});
  ASSERT_TRUE(whole.ok());
  LocalBackend backend(**whole);
  DecodeRequest req;
  req.prompt = prompt;
  req.gen = steps;
  Result<DecodeResult> mono = RunDecode(backend, req, info->Seed());
  ASSERT_TRUE(mono.ok()) << mono.status().ToString();
  EXPECT_EQ(generated, mono->generated);
  EXPECT_EQ(chain.Finalize(), mono->cis2_ref);
}

}  // namespace
}  // namespace lockstep
