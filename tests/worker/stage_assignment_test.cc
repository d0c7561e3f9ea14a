// Stage assignment on its own (worker/stage_assignment.h): which Assign
// only re-wires, what an Assign is refused for before any weight is loaded
// (the weight budget, weight files listed for a one-file checkpoint, a
// read file without a pin, no next hop), the digests checked after the
// Hello, and the links and ack that answer an accepted Assign. Loads use
// the tiny-llama fixture; the Hello's digests are compared with
// InspectModelDir's.
#include "worker/stage_assignment.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <variant>

#include "engine/ops/fp_env.h"
#include "tests/runtime/stage_host_fixture.h"

namespace lockstep::testing {
namespace {

using stage_assignment::AppendLinksAndAck;
using stage_assignment::CheckHashes;
using stage_assignment::Load;
using stage_assignment::SameStage;

wire::Assign Middle() {
  wire::Assign a;
  a.model_dir = "/models/m";
  a.expected_weights_sha256 = Digest{1};
  a.expected_config_sha256 = Digest{2};
  a.expected_tokenizer_sha256 = Digest{3};
  a.layer_lo = 2;
  a.layer_hi = 4;
  a.worker_index = 1;
  a.next_hop = "tcp://10.0.0.2:5555";
  return a;
}

TEST(SameStage, OnlyTheLinksMayChange) {
  const wire::Assign a = Middle();
  wire::Assign rewired = a;
  rewired.next_hop = "tcp://10.0.0.9:5555";
  rewired.next_hop_key = "key";
  rewired.upstream_key = "other";
  EXPECT_TRUE(SameStage(a, a));
  EXPECT_TRUE(SameStage(a, rewired)) << "a new neighbour re-wires the same stage";
  const auto differs = [&](auto change) {
    wire::Assign b = a;
    change(b);
    return !SameStage(a, b);
  };
  EXPECT_TRUE(differs([](wire::Assign& b) { b.model_dir = "/models/n"; }));
  EXPECT_TRUE(differs([](wire::Assign& b) { b.expected_weights_sha256 = Digest{9}; }));
  EXPECT_TRUE(differs([](wire::Assign& b) { b.expected_config_sha256 = Digest{9}; }));
  EXPECT_TRUE(differs([](wire::Assign& b) { b.expected_tokenizer_sha256 = Digest{9}; }));
  EXPECT_TRUE(differs([](wire::Assign& b) { b.layer_lo = 1; }));
  EXPECT_TRUE(differs([](wire::Assign& b) { b.layer_hi = 5; }));
  EXPECT_TRUE(differs([](wire::Assign& b) { b.is_first = true; }));
  EXPECT_TRUE(differs([](wire::Assign& b) { b.is_last = true; }));
  EXPECT_TRUE(differs([](wire::Assign& b) { b.worker_index = 2; }));
}

TEST(CheckHashes, NamesTheFirstArtifactThatDiffers) {
  const wire::Assign a = Middle();
  wire::Hello hello;
  hello.weights_sha256 = Digest{1};
  hello.config_sha256 = Digest{2};
  hello.tokenizer_sha256 = Digest{3};
  EXPECT_TRUE(CheckHashes(a, hello).ok());
  hello.tokenizer_sha256 = Digest{4};
  hello.config_sha256 = Digest{5};
  const Status st = CheckHashes(a, hello);
  EXPECT_EQ(st.kind(), ErrorKind::kMismatch);
  EXPECT_EQ(st.message().rfind("config_sha256 differs: assigned " + ToHex(Digest{2}) +
                                   ", this worker's file has " + ToHex(Digest{5}),
                               0),
            0u)
      << st.message();
}

TEST(AppendLinksAndAck, LinksThenTheAck) {
  std::vector<Outgoing> out;
  AppendLinksAndAck(Middle(), &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].to, Outgoing::To::kConnectNext);
  EXPECT_EQ(out[0].endpoint, "tcp://10.0.0.2:5555");
  EXPECT_EQ(out[0].label, "stage 2");
  EXPECT_EQ(out[1].to, Outgoing::To::kCoordinator);
  Result<wire::Message> ack = wire::ParseMessage(out[1].frame);
  ASSERT_TRUE(ack.ok());
  const auto& a = std::get<wire::AssignAck>(*ack);
  EXPECT_EQ(a.worker_index, 1u);
  EXPECT_EQ(a.layer_lo, 2u);
  EXPECT_EQ(a.layer_hi, 4u);
  out.clear();
  wire::Assign last = Middle();
  last.is_last = true;
  last.next_hop.clear();
  AppendLinksAndAck(last, &out);
  ASSERT_EQ(out.size(), 1u) << "a last stage with no ring hop opens nothing";
  last.ring_hop = "tcp://10.0.0.1:5555";
  out.clear();
  AppendLinksAndAck(last, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].to, Outgoing::To::kConnectRing);
  EXPECT_EQ(out[0].endpoint, "tcp://10.0.0.1:5555");
  EXPECT_EQ(out[0].label, "stage 0");
}

class LoadAssignment : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(TinyLlama())) LOCKSTEP_FIXTURE_ABSENT() << TinyLlama();
    ASSERT_TRUE(ops::PinFpEnvironment().ok());
    Result<ModelInfo> info = InspectModelDir(TinyLlama(), ModelPins{});
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    info_ = std::move(info).value();
  }
  Status Refusal(const wire::Assign& a, uint64_t weight_budget = 0) {
    Result<stage_assignment::Loaded> loaded =
        Load(a, a.model_dir, ComputeOptions{}, weight_budget, "w1");
    EXPECT_FALSE(loaded.ok());
    return loaded.status();
  }

  ModelInfo info_;
};

TEST_F(LoadAssignment, LoadsTheStageAndAnswersWithTheFilesDigests) {
  const wire::Assign a = StageAssign(info_, 0, 1, true, false, 0);
  Result<stage_assignment::Loaded> loaded = Load(a, a.model_dir, ComputeOptions{}, 0, "w1");
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(loaded->stage);
  EXPECT_EQ(loaded->hello.worker_id, "w1");
  EXPECT_EQ(loaded->hello.weights_sha256, info_.hashes.weights);
  EXPECT_EQ(loaded->hello.config_sha256, info_.hashes.config);
  EXPECT_EQ(loaded->hello.tokenizer_sha256, info_.hashes.tokenizer);
  EXPECT_TRUE(CheckHashes(a, loaded->hello).ok());
}

TEST_F(LoadAssignment, AStageOverTheWeightBudgetIsRefusedNamingTheLimitAndWorker) {
  const Status st = Refusal(StageAssign(info_, 0, 1, true, false, 0), /*weight_budget=*/1);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_NE(st.message().find("weight_bytes_per_worker (--memory-budget)"), std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("the weights of layers [0,1) on worker w1"), std::string::npos)
      << st.message();
}

TEST_F(LoadAssignment, WeightFilesListedForAOneFileCheckpointAreRefused) {
  wire::Assign a = StageAssign(info_, 0, 1, true, false, 0);
  a.weight_files.push_back(wire::WeightFile{"model.safetensors", info_.hashes.weights});
  const Status st = Refusal(a);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_NE(st.message().find("the assignment lists weight files of a sharded checkpoint"),
            std::string::npos)
      << st.message();
}

TEST_F(LoadAssignment, AStageBeforeTheLastNeedsANextHop) {
  wire::Assign a = StageAssign(info_, 0, 1, true, false, 0);
  a.next_hop.clear();
  EXPECT_EQ(Refusal(a).message(), "no next hop for a non-last stage");
  EXPECT_EQ(Refusal(StageAssign(info_, 1, 3, false, true, 1)).kind(), ErrorKind::kInvalid)
      << "layers the model lacks";
}

TEST_F(LoadAssignment, EveryFileAStageReadsNeedsAPin) {
  Result<OpenModel> model = OpenModelDir(TinyLlama(), ModelPins{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  ModelPins pins;
  const Status st = stage_assignment::EveryReadFileIsPinned(*model->weights, pins, "dir");
  EXPECT_EQ(st.kind(), ErrorKind::kMismatch);
  EXPECT_NE(st.message().find(": this stage reads it, but the assignment gives no sha256 for it"),
            std::string::npos)
      << st.message();
  for (const std::string& name : model->weights->digest_names()) pins.files[name] = Digest{};
  EXPECT_TRUE(stage_assignment::EveryReadFileIsPinned(*model->weights, pins, "dir").ok());
}

}  // namespace
}  // namespace lockstep::testing
