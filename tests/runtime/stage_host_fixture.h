// Two StageHosts of tiny-llama (layers [0,1) and [1,2): the first and the
// last stage of a pipeline) driven by hand, as a worker's threads drive
// them, with every frame parsed on the receiving side and given back to
// one FramePool: the worker tests that need no sockets.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "engine/model_loader.h"
#include "engine/witness.h"
#include "engine/ops/fp_env.h"
#include "tests/fixture_absent.h"
#include "wire/frame_pool.h"
#include "wire/messages.h"
#include "worker/stage_host.h"

namespace lockstep::testing {

inline std::string TinyLlama() {
  return std::string(LOCKSTEP_SHARED_DIR) + "/fixtures/conformance/tiny-llama";
}

inline wire::Assign StageAssign(const ModelInfo& m, uint32_t lo, uint32_t hi, bool first,
                                bool last, uint32_t index) {
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
  if (last && !first) a.ring_hop = "tcp://127.0.0.1:2";
  a.worker_index = index;
  return a;
}

// The messages of `out` bound for `to`, parsed (as the receiver's I/O
// thread would) and taken out of `out`; their frames go back to `pool` (as
// the sender's would).
inline std::vector<wire::Message> TakeAll(std::vector<Outgoing>* out, Outgoing::To to,
                                          wire::FramePool* pool) {
  std::vector<wire::Message> got;
  size_t kept = 0;  // compacted in place: `out` keeps its capacity
  for (Outgoing& o : *out) {
    if (o.to != to) {
      if (&(*out)[kept] != &o) (*out)[kept] = std::move(o);
      ++kept;
      continue;
    }
    Result<wire::Message> parsed = wire::ParseMessage(o.frame);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    if (parsed.ok()) got.push_back(std::move(*parsed));
    pool->Give(std::move(o.frame));
  }
  out->resize(kept);
  return got;
}

// The one message of `out`, which must be bound for `to` (an ErrorReport
// fails the test).
inline wire::Message Take(std::vector<Outgoing>* out, Outgoing::To to, wire::FramePool* pool) {
  EXPECT_EQ(out->size(), 1u);
  std::vector<wire::Message> got = TakeAll(out, to, pool);
  out->clear();
  if (got.empty()) return wire::ErrorReport{ErrorKind::kInternal, "no message", false, 0};
  if (auto* e = std::get_if<wire::ErrorReport>(&got[0])) ADD_FAILURE() << e->message;
  return got[0];
}

// The two stages, assigned, with one session open on both.
class TwoStages : public ::testing::Test {
 protected:
  static constexpr uint64_t kSession = 7;

  void SetUp() override {
    if (!std::filesystem::exists(TinyLlama())) LOCKSTEP_FIXTURE_ABSENT() << TinyLlama();
    ASSERT_TRUE(ops::PinFpEnvironment().ok());
    Result<ModelInfo> info = InspectModelDir(TinyLlama(), ModelPins{});
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    ASSERT_EQ(info->config.num_layers, 2);
    info_ = std::move(info).value();
    first_.set_frame_pool(&pool_);
    last_.set_frame_pool(&pool_);
    out_.reserve(8);
    first_.Handle(StageAssign(info_, 0, 1, true, false, 0), &out_);
    last_.Handle(StageAssign(info_, 1, 2, false, true, 1), &out_);
    for (const wire::Message& m : TakeAll(&out_, Outgoing::To::kCoordinator, &pool_)) {
      ASSERT_FALSE(std::holds_alternative<wire::ErrorReport>(m))
          << std::get<wire::ErrorReport>(m).message;
    }
    out_.clear();
  }

  // Opens `id` on both stages, reserving `positions` cache entries.
  void Open(uint64_t id, uint32_t positions, bool trace = false) {
    wire::SessionOpen open;
    open.session_id = id;
    open.reserve_positions = positions;
    open.trace = trace;
    first_.Handle(open, &out_);
    last_.Handle(Take(&out_, Outgoing::To::kNextStage, &pool_), &out_);
    ASSERT_TRUE(out_.empty());
  }

  // Session kSession's prompt `ids` as its first step, with the chain
  // handed to the last stage, asking it to relay `relay` steps after it.
  wire::TokenInput PromptInput(std::vector<uint32_t> ids, uint32_t relay) const {
    wire::TokenInput in;
    in.phase = wire::TokenInput::Phase::kPrefill;
    in.session_id = kSession;
    in.handoff = wire::ChainHandoff{0, WitnessChain(info_.Seed(), ids).Export(), relay};
    in.token_ids = std::move(ids);
    return in;
  }

  ModelInfo info_;
  wire::FramePool pool_;
  StageHost first_{"first", ComputeOptions{}};
  StageHost last_{"last", ComputeOptions{}};
  std::vector<Outgoing> out_;
};

}  // namespace lockstep::testing
