#include "runtime_test_util.h"

#include "runtime/compare.h"

#include <atomic>

#include "cli_runner.h"
#include "engine/io/synthetic_model.h"
#include "engine/local_backend.h"
#include "engine/ops/fp_env.h"

namespace lockstep::testing {

namespace {

void WriteModel(const std::string& dir, const SyntheticShape& shape, uint64_t seed) {
  const Status st = WriteSyntheticModel(dir, shape, seed, "");
  ASSERT_TRUE(st.ok()) << st.ToString();
}

void DecodeMonolithic(const std::string& dir, const DecodeRequest& req,
                      std::optional<int> window, DecodeResult* out) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  Result<OpenModel> model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  const StageSpec all{0, model->config.num_layers, true, true};
  auto stage = LoadStage(*model, all, ComputeOptions{"scalar"});
  ASSERT_TRUE(stage.ok()) << stage.status().ToString();
  LocalBackend backend(**stage);
  if (window) {
    ASSERT_TRUE(backend.SetWindow(*window).ok());
  }
  Result<DecodeResult> r = RunDecode(backend, req, model->Seed());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  *out = std::move(r).value();
}

}  // namespace

std::string MakeModel(const std::string& tag, int layers, uint64_t seed) {
  SyntheticShape shape;
  shape.layers = layers;
  return MakeModel(tag, shape, seed);
}

std::string MakeModel(const std::string& tag, const SyntheticShape& shape, uint64_t seed) {
  const std::string dir = MakeTempDir(tag);
  WriteModel(dir, shape, seed);
  return dir;
}

DecodeResult Monolithic(const std::string& dir, const DecodeRequest& req,
                        std::optional<int> window) {
  DecodeResult out;  // empty (and the test failed) when a precondition fails
  DecodeMonolithic(dir, req, window, &out);
  return out;
}

Result<std::unique_ptr<runtime::WorkerProcesses>> SpawnWorkerProcesses(
    int count, const std::vector<std::string>& extra_allow, ComputeOptions compute) {
  runtime::WorkerSpawnOptions o;
  o.exe = LOCKSTEP_CLI_PATH;
  o.count = count;
  o.compute = std::move(compute);
  o.extra_allow = extra_allow;
  return runtime::WorkerProcesses::Spawn(o);
}

std::vector<std::vector<LayerRange>> AllPartitions(int layers) {
  std::vector<std::vector<LayerRange>> out;
  // Bit i of `cuts` set = a stage boundary after layer i+1.
  for (uint32_t cuts = 0; cuts < (1u << (layers - 1)); ++cuts) {
    std::vector<LayerRange> plan;
    int lo = 0;
    for (int l = 1; l < layers; ++l) {
      if (cuts & (1u << (l - 1))) {
        plan.push_back({lo, l});
        lo = l;
      }
    }
    plan.push_back({lo, layers});
    out.push_back(plan);
  }
  return out;
}

InProcCluster::InProcCluster(size_t n,
                             const std::function<void(size_t, WorkerOptions&)>& customize) {
  Start(n, customize);
}

void InProcCluster::Start(size_t n, const std::function<void(size_t, WorkerOptions&)>& customize) {
  static std::atomic<int> counter{0};
  const int id = counter.fetch_add(1);
  for (size_t i = 0; i < n; ++i) {
    WorkerOptions o;
    o.listen = "inproc://rt-" + std::to_string(id) + "-w" + std::to_string(i);
    o.transport.security.insecure = true;  // inproc; a test may name a tcp next hop
    if (customize) customize(i, o);
    Result<std::unique_ptr<Worker>> w = Worker::Create(context_, std::move(o));
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    endpoints_.push_back((*w)->endpoint());
    workers_.push_back(std::move(w).value());
  }
  for (size_t i = 0; i < n; ++i) {
    threads_.emplace_back([w = workers_[i].get()] { EXPECT_TRUE(w->Run().ok()); });
  }
}

void InProcCluster::StopWorker(size_t i) {
  if (!threads_[i].joinable()) return;
  workers_[i]->Stop();
  threads_[i].join();
  workers_[i].reset();  // closes its sockets: the peer is gone
}

InProcCluster::~InProcCluster() {
  for (size_t i = 0; i < threads_.size(); ++i) StopWorker(i);
}

ClusterConfig InProcCluster::Config(const std::string& model_dir, std::vector<LayerRange> plan,
                                    int heartbeat_ms, int liveness) const {
  ClusterConfig c;
  c.model_dir = model_dir;
  c.workers = endpoints_;
  c.auto_plan = plan.empty();
  c.plan = std::move(plan);
  c.heartbeat = std::chrono::milliseconds(heartbeat_ms);
  c.liveness = liveness;
  c.request_timeout = std::chrono::milliseconds(20000);
  return c;
}

void ExpectSameDecode(const DecodeResult& got, const DecodeResult& want) {
  const Status same = runtime::CompareResults(got, want, "got", "want");
  EXPECT_TRUE(same.ok()) << same.ToString();
}

}  // namespace lockstep::testing
