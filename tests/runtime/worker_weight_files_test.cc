// A worker of a sharded checkpoint opens and hashes only the files holding
// its stage's tensors, each checked against the digest its assignment
// carries: a damaged or missing file no stage of its reads changes
// nothing, a damaged file of its own is refused naming that file, and so
// is a file of its own the assignment gives no digest for.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "cli_runner.h"
#include "engine/io/synthetic_model.h"
#include "engine/ops/fp_env.h"
#include "runtime_test_util.h"
#include "worker/stage_host.h"

namespace lockstep::testing {
namespace {

namespace fs = std::filesystem;

constexpr size_t kWorker = 1;  // serves layers [2, 4), last

class WorkerWeightFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(MakeTempDir("weight_files"));
    SyntheticShape shape;
    shape.layers = 4;
    shape.untied = true;  // the last stage reads lm_head, not the embedding
    ASSERT_TRUE(WriteSyntheticModel(*dir_, shape, 7, "", 4).ok());
  }
  static void TearDownTestSuite() { delete dir_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }

  static std::vector<LayerRange> Plan() { return {{0, 2}, {2, 4}}; }

  // The shard files worker kWorker reads, and those it does not.
  static void SplitFiles(std::set<std::string>* mine, std::set<std::string>* others) {
    auto info = InspectModelDir(*dir_, ModelPins{});
    ASSERT_TRUE(info.ok()) << info.status().ToString();
    auto files = StageWeightFiles(*info, StageSpec{2, 4, false, true});
    ASSERT_TRUE(files.ok()) << files.status().ToString();
    for (const FileDigest& f : *files) mine->insert(f.file);
    for (const FileDigest& f : info->hashes.weight_files) {
      if (!mine->count(f.file)) others->insert(f.file);
    }
    ASSERT_TRUE(mine->count(kShardIndexFile));
    ASSERT_FALSE(others->empty()) << "every shard holds a tensor of the last stage";
  }

  // A copy of the model for worker kWorker to read instead.
  static std::string CopyModel(const std::string& tag) {
    const std::string copy = MakeTempDir(tag);
    for (const auto& e : fs::directory_iterator(*dir_)) {
      fs::copy_file(e.path(), copy + "/" + e.path().filename().string(),
                    fs::copy_options::overwrite_existing);
    }
    return copy;
  }

  static void FlipLastByte(const std::string& path) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 1));
  }

  // Runs the plan with worker kWorker reading `worker_dir`.
  static Result<DecodeResult> RunWith(const std::string& worker_dir) {
    InProcCluster cluster(2, [&](size_t i, WorkerOptions& o) {
      if (i == kWorker) o.model_dir_override = worker_dir;
    });
    LOCKSTEP_ASSIGN_OR_RETURN(auto c, Coordinator::Start(cluster.context(),
                                                         cluster.Config(*dir_, Plan())));
    LOCKSTEP_ASSIGN_OR_RETURN(auto session, c->OpenSession(std::nullopt));
    return RunDecode(*session, Request(), c->seed());
  }

  static DecodeRequest Request() {
    DecodeRequest r;
    r.prompt = {5, 9, 100, 17};
    r.gen = 6;
    return r;
  }

  static std::string* dir_;
};
std::string* WorkerWeightFiles::dir_ = nullptr;

TEST_F(WorkerWeightFiles, UnrelatedShardMissingOrDamagedStillServes) {
  std::set<std::string> mine, others;
  SplitFiles(&mine, &others);
  const DecodeResult want = Monolithic(*dir_, Request());
  const std::string missing = CopyModel("weight_files_missing");
  for (const std::string& f : others) fs::remove(missing + "/" + f);
  auto r1 = RunWith(missing);
  ASSERT_TRUE(r1.ok()) << r1.status().ToString();
  ExpectSameDecode(*r1, want);

  const std::string damaged = CopyModel("weight_files_damaged");
  for (const std::string& f : others) FlipLastByte(damaged + "/" + f);
  auto r2 = RunWith(damaged);
  ASSERT_TRUE(r2.ok()) << r2.status().ToString();
  ExpectSameDecode(*r2, want);
}

TEST_F(WorkerWeightFiles, DamagedOwnShardIsRefusedNamingIt) {
  std::set<std::string> mine, others;
  SplitFiles(&mine, &others);
  for (const std::string& f : mine) {
    if (f == kShardIndexFile) continue;
    SCOPED_TRACE(f);
    const std::string damaged = CopyModel("weight_files_own");
    FlipLastByte(damaged + "/" + f);
    auto r = RunWith(damaged);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().kind(), ErrorKind::kMismatch) << r.status().ToString();
    EXPECT_NE(r.status().message().find(f + ": sha256 expected"), std::string::npos)
        << r.status().ToString();
  }
}

TEST_F(WorkerWeightFiles, DamagedIndexIsRefusedNamingIt) {
  const std::string damaged = CopyModel("weight_files_index");
  {
    std::ofstream f(damaged + "/" + kShardIndexFile, std::ios::app);
    f << "\n";  // still valid JSON, other bytes
  }
  auto r = RunWith(damaged);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(std::string(kShardIndexFile) + ": sha256 expected"),
            std::string::npos)
      << r.status().ToString();
}

// What a worker's StageHost answers an Assign of worker kWorker's layers
// whose digests are `files`: the message bound for the coordinator.
wire::Message AnswerTo(const ModelInfo& info, std::vector<wire::WeightFile> files) {
  wire::Assign a;
  a.model_dir = info.files.dir;
  a.expected_weights_sha256 = info.hashes.weights;
  a.expected_config_sha256 = info.hashes.config;
  a.expected_tokenizer_sha256 = info.hashes.tokenizer;
  a.layer_lo = 2;
  a.layer_hi = 4;
  a.is_last = true;
  a.worker_index = kWorker;
  a.weight_files = std::move(files);
  StageHost host("w", ComputeOptions{});
  std::vector<Outgoing> out;
  host.Handle(a, &out);
  EXPECT_FALSE(out.empty());
  Result<wire::Message> m = wire::ParseMessage(out.empty() ? wire::Frame{} : out.front().frame);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : wire::Message{wire::ErrorReport{}};
}

TEST_F(WorkerWeightFiles, OwnFileWithoutAnAssignedDigestIsRefusedNamingIt) {
  auto info = InspectModelDir(*dir_, ModelPins{});
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  auto mine = StageWeightFiles(*info, StageSpec{2, 4, false, true});
  ASSERT_TRUE(mine.ok()) << mine.status().ToString();
  std::vector<wire::WeightFile> all;
  for (const FileDigest& f : *mine) all.push_back({f.file, f.sha256});
  // Every digest given: the stage loads and says hello.
  EXPECT_TRUE(std::holds_alternative<wire::Hello>(AnswerTo(*info, all)));
  // Each file left out in turn, the index included: refused, naming it.
  for (size_t skip = 0; skip < all.size(); ++skip) {
    SCOPED_TRACE(all[skip].name);
    std::vector<wire::WeightFile> some = all;
    some.erase(some.begin() + static_cast<std::ptrdiff_t>(skip));
    const wire::Message m = AnswerTo(*info, some);
    const auto* e = std::get_if<wire::ErrorReport>(&m);
    ASSERT_NE(e, nullptr) << wire::MessageName(m);
    EXPECT_EQ(e->kind, ErrorKind::kMismatch) << e->message;
    EXPECT_NE(e->message.find(all[skip].name + ": this stage reads it, but the assignment gives "
                              "no sha256 for it"),
              std::string::npos)
        << e->message;
  }
}

}  // namespace
}  // namespace lockstep::testing
