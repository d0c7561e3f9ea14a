// Helpers for the runtime tests: synthetic models, monolithic reference
// decodes, in-process clusters (Worker loops on threads over inproc) and
// loopback `lockstep worker` processes. A helper that fails a precondition
// records a fatal failure and dereferences nothing after it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <zmq.hpp>

#include "coordinator/coordinator.h"
#include "engine/decode.h"
#include "engine/io/synthetic_model.h"
#include "engine/model_loader.h"
#include "runtime/worker_processes.h"
#include "worker/worker.h"

namespace lockstep::testing {

// A fresh synthetic model folder (no tokenizer) of `layers` layers.
std::string MakeModel(const std::string& tag, int layers, uint64_t seed);
// The same of any shape (a Qwen3-MoE one, say).
std::string MakeModel(const std::string& tag, const SyntheticShape& shape, uint64_t seed);

// The monolithic decode of `req` on the model in `dir` (LocalBackend).
DecodeResult Monolithic(const std::string& dir, const DecodeRequest& req,
                        std::optional<int> window = std::nullopt);

// `count` loopback worker processes of the lockstep binary under test.
Result<std::unique_ptr<runtime::WorkerProcesses>> SpawnWorkerProcesses(
    int count, const std::vector<std::string>& extra_allow = {}, ComputeOptions compute = {});

// Every way to cut [0, layers) into contiguous non-empty ranges.
std::vector<std::vector<LayerRange>> AllPartitions(int layers);

// Workers on threads, bound to inproc endpoints of one context.
// Destroy coordinators using context() before the cluster.
class InProcCluster {
 public:
  // customize(i, options) may set test hooks for worker i.
  InProcCluster(size_t workers,
                const std::function<void(size_t, WorkerOptions&)>& customize = {});
  ~InProcCluster();

  zmq::context_t& context() { return context_; }
  const std::vector<std::string>& endpoints() const { return endpoints_; }
  // Stops worker i (its thread returns, its sockets close).
  void StopWorker(size_t i);
  bool Running(size_t i) const { return threads_[i].joinable(); }
  Worker& worker(size_t i) { return *workers_[i]; }

  // A config over these workers with the given plan and timings.
  ClusterConfig Config(const std::string& model_dir, std::vector<LayerRange> plan,
                       int heartbeat_ms = 50, int liveness = 10) const;

 private:
  void Start(size_t workers, const std::function<void(size_t, WorkerOptions&)>& customize);

  zmq::context_t context_{1};
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> threads_;
  std::vector<std::string> endpoints_;
};

// Asserts that two decodes are identical in every token and digest
// (runtime::CompareResults: per-step logits digests and traces included).
void ExpectSameDecode(const DecodeResult& got, const DecodeResult& want);

}  // namespace lockstep::testing
