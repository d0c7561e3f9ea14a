// Server metrics, exposed as Prometheus text (format 0.0.4) on /metrics.
// Counters and histograms only grow; gauges are set by their owner.
// Names are prefixed lockstep_. Thread-safe (one mutex; updates are rare
// next to a forward pass).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace lockstep::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size()) {}
  void Observe(double v);
  void Write(const std::string& name, const std::string& help, std::string* out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative)
  uint64_t count_ = 0;
  double sum_ = 0;
};

class Metrics {
 public:
  Metrics();

  void Request(int http_status);
  void Error(const std::string& kind);
  void Tokens(uint64_t prompt, uint64_t generated);
  void TimeToFirstToken(double seconds);
  void InterToken(double seconds);
  void Step(size_t batch_rows, double forward_seconds);
  void PrefixLookup(bool hit, uint64_t reused_tokens);
  void SetPrefixBytes(uint64_t bytes);
  // A speculative step fed `proposed` guessed tokens and kept `kept` of them.
  void Speculation(uint64_t proposed, uint64_t kept);
  void SetQueue(size_t queued, size_t active);
  // Sharded: bytes on the coordinator's links to its workers so far (the
  // hops coordinator -> first stage and last stage -> coordinator).
  void SetWire(uint64_t bytes_to_workers, uint64_t bytes_from_workers);
  // Sharded: each stage's compute seconds as its worker last reported
  // them, and bytes per hop ("coordinator->0", "0->1", ...,
  // "K-1->coordinator"). In process the one stage's compute time is the
  // steps' forward time.
  struct Hop {
    std::string name;
    uint64_t bytes = 0;
  };
  void SetStages(std::vector<double> compute_seconds, std::vector<Hop> hops);

  // Called at the start of every Render to refresh figures owned
  // elsewhere (the cluster's links and workers); null: none. Setting it
  // waits for a refresh in progress, so its owner may clear it and go.
  void SetSource(std::function<void()> refresh);

  std::string Render() const;

 private:
  mutable std::mutex source_mu_;  // held while the source runs
  std::function<void()> source_;
  mutable std::mutex mu_;
  std::map<int, uint64_t> requests_;
  std::map<std::string, uint64_t> errors_;
  uint64_t prompt_tokens_ = 0, generated_tokens_ = 0;
  uint64_t prefix_hits_ = 0, prefix_misses_ = 0, prefix_reused_tokens_ = 0, prefix_bytes_ = 0;
  uint64_t speculative_proposed_ = 0, speculative_kept_ = 0;
  uint64_t queued_ = 0, active_ = 0;
  double compute_seconds_ = 0;
  bool wire_set_ = false;
  uint64_t wire_to_ = 0, wire_from_ = 0;
  bool stages_set_ = false;
  std::vector<double> stage_seconds_;
  std::vector<Hop> hops_;
  Histogram ttft_, itl_, batch_, step_;
};

}  // namespace lockstep::server
