#include "server/metrics.h"

#include <cstdio>

namespace lockstep::server {
namespace {

std::string Num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void Head(const std::string& name, const std::string& type, const std::string& help,
          std::string* out) {
  *out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void Scalar(const std::string& name, const std::string& type, const std::string& help, double v,
            std::string* out) {
  Head(name, type, help, out);
  *out += name + " " + Num(v) + "\n";
}

}  // namespace

void Histogram::Observe(double v) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (v <= bounds_[i]) {
      ++counts_[i];
      break;
    }
  }
  ++count_;
  sum_ += v;
}

void Histogram::Write(const std::string& name, const std::string& help, std::string* out) const {
  Head(name, "histogram", help, out);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    *out += name + "_bucket{le=\"" + Num(bounds_[i]) + "\"} " + std::to_string(cumulative) + "\n";
  }
  *out += name + "_bucket{le=\"+Inf\"} " + std::to_string(count_) + "\n";
  *out += name + "_sum " + Num(sum_) + "\n" + name + "_count " + std::to_string(count_) + "\n";
}

Metrics::Metrics()
    : ttft_({0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}),
      itl_({0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28}),
      batch_({1, 2, 4, 8, 16, 32, 64}),
      step_({0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28}) {}

void Metrics::Request(int http_status) {
  std::lock_guard<std::mutex> l(mu_);
  ++requests_[http_status];
}

void Metrics::Error(const std::string& kind) {
  std::lock_guard<std::mutex> l(mu_);
  ++errors_[kind];
}

void Metrics::Tokens(uint64_t prompt, uint64_t generated) {
  std::lock_guard<std::mutex> l(mu_);
  prompt_tokens_ += prompt;
  generated_tokens_ += generated;
}

void Metrics::TimeToFirstToken(double s) {
  std::lock_guard<std::mutex> l(mu_);
  ttft_.Observe(s);
}

void Metrics::InterToken(double s) {
  std::lock_guard<std::mutex> l(mu_);
  itl_.Observe(s);
}

void Metrics::Step(size_t rows, double seconds) {
  std::lock_guard<std::mutex> l(mu_);
  batch_.Observe(static_cast<double>(rows));
  step_.Observe(seconds);
  compute_seconds_ += seconds;
}

void Metrics::PrefixLookup(bool hit, uint64_t reused) {
  std::lock_guard<std::mutex> l(mu_);
  ++(hit ? prefix_hits_ : prefix_misses_);
  prefix_reused_tokens_ += reused;
}

void Metrics::Speculation(uint64_t proposed, uint64_t kept) {
  std::lock_guard<std::mutex> l(mu_);
  speculative_proposed_ += proposed;
  speculative_kept_ += kept;
}

void Metrics::SetPrefixBytes(uint64_t bytes) {
  std::lock_guard<std::mutex> l(mu_);
  prefix_bytes_ = bytes;
}

void Metrics::SetStages(std::vector<double> compute_seconds, std::vector<Hop> hops) {
  std::lock_guard<std::mutex> l(mu_);
  stages_set_ = true;
  stage_seconds_ = std::move(compute_seconds);
  hops_ = std::move(hops);
}

void Metrics::SetSource(std::function<void()> refresh) {
  std::lock_guard<std::mutex> l(source_mu_);
  source_ = std::move(refresh);
}

void Metrics::SetWire(uint64_t to, uint64_t from) {
  std::lock_guard<std::mutex> l(mu_);
  wire_set_ = true;
  wire_to_ = to;
  wire_from_ = from;
}

void Metrics::SetQueue(size_t queued, size_t active) {
  std::lock_guard<std::mutex> l(mu_);
  queued_ = queued;
  active_ = active;
}

std::string Metrics::Render() const {
  {
    std::lock_guard<std::mutex> l(source_mu_);
    if (source_) source_();
  }
  std::lock_guard<std::mutex> l(mu_);
  std::string out;
  Head("lockstep_requests_total", "counter", "HTTP requests answered, by status", &out);
  for (const auto& [status, n] : requests_) {
    out += "lockstep_requests_total{status=\"" + std::to_string(status) + "\"} " +
           std::to_string(n) + "\n";
  }
  Head("lockstep_errors_total", "counter", "Failed requests, by kind", &out);
  for (const auto& [kind, n] : errors_) {
    out += "lockstep_errors_total{kind=\"" + kind + "\"} " + std::to_string(n) + "\n";
  }
  Scalar("lockstep_prompt_tokens_total", "counter", "Prompt tokens of admitted requests",
         static_cast<double>(prompt_tokens_), &out);
  Scalar("lockstep_generated_tokens_total", "counter", "Tokens generated",
         static_cast<double>(generated_tokens_), &out);
  Scalar("lockstep_queue_depth", "gauge", "Requests admitted but not yet started",
         static_cast<double>(queued_), &out);
  Scalar("lockstep_active_sessions", "gauge", "Sessions holding a KV cache",
         static_cast<double>(active_), &out);
  Scalar("lockstep_prefix_cache_hits_total", "counter", "Admissions that reused a cached prefix",
         static_cast<double>(prefix_hits_), &out);
  Scalar("lockstep_prefix_cache_misses_total", "counter", "Admissions without a cached prefix",
         static_cast<double>(prefix_misses_), &out);
  Scalar("lockstep_prefix_cache_reused_tokens_total", "counter", "Prompt tokens not recomputed",
         static_cast<double>(prefix_reused_tokens_), &out);
  Scalar("lockstep_prefix_cache_bytes", "gauge", "Bytes held by the prefix cache",
         static_cast<double>(prefix_bytes_), &out);
  Scalar("lockstep_speculative_proposed_tokens_total", "counter",
         "Guessed tokens fed to speculative steps (prompt lookup or --draft-model)",
         static_cast<double>(speculative_proposed_), &out);
  Scalar("lockstep_speculative_kept_tokens_total", "counter",
         "Guessed tokens the model itself chose (each saved a weight pass)",
         static_cast<double>(speculative_kept_), &out);
  Head("lockstep_stage_compute_seconds_total", "counter",
       "Time each pipeline stage spent on steps (in process: the one stage's forward passes; "
       "sharded: as each worker reports in its heartbeat reply)",
       &out);
  if (!stages_set_) {
    out += "lockstep_stage_compute_seconds_total{stage=\"0\"} " + Num(compute_seconds_) + "\n";
  }
  for (size_t k = 0; stages_set_ && k < stage_seconds_.size(); ++k) {
    out += "lockstep_stage_compute_seconds_total{stage=\"" + std::to_string(k) + "\"} " +
           Num(stage_seconds_[k]) + "\n";
  }
  if (stages_set_) {
    Head("lockstep_hop_bytes_total", "counter",
         "Bytes sent over each hop of the pipeline (the workers' as they report them)", &out);
    for (const Hop& h : hops_) {
      out += "lockstep_hop_bytes_total{hop=\"" + h.name + "\"} " + std::to_string(h.bytes) + "\n";
    }
  }
  if (wire_set_) {
    Head("lockstep_wire_bytes_total", "counter",
         "Bytes on the coordinator's links (to_workers: to the first stage; from_workers: "
         "from the last)", &out);
    out += "lockstep_wire_bytes_total{direction=\"to_workers\"} " + std::to_string(wire_to_) + "\n";
    out += "lockstep_wire_bytes_total{direction=\"from_workers\"} " + std::to_string(wire_from_) +
           "\n";
  }
  ttft_.Write("lockstep_time_to_first_token_seconds", "Admission to first token", &out);
  itl_.Write("lockstep_inter_token_seconds", "Time between a session's tokens", &out);
  batch_.Write("lockstep_batch_rows", "Sessions advanced by one batched step", &out);
  step_.Write("lockstep_step_seconds", "Duration of one batched step", &out);
  return out;
}

}  // namespace lockstep::server
