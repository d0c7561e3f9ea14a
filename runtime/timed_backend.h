// TimedBackend: a StepBackend decorator that times the calls it forwards.
// `lockstep run` (monolithic and sharded) and `lockstep bench` time decode
// steps through it, so their per-token figures measure the same code path.
// A decode step is a Feed (or FeedAndChoose) of one token after the first,
// or one step of a multi-row FeedRows after the first call (its time shared
// by the steps it returned); the first
// (the prefill, whatever its length) is recorded separately (its end, wall and process CPU clock: time to first
// token). Timing changes no bit: every call is forwarded unchanged.
// `inner` must outlive this. Thread-compatible.
#pragma once

#include <chrono>
#include <optional>

#include "engine/decode.h"

namespace lockstep::runtime {

class TimedBackend final : public StepBackend {
 public:
  using Clock = std::chrono::steady_clock;

  explicit TimedBackend(StepBackend& inner) : inner_(inner) {}

  Status Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) override;
  // Timed like Feed (a sharded backend chooses the token remotely).
  Result<StepOutcome> FeedAndChoose(std::span<const uint32_t> tokens,
                                    const StepContext& ctx) override;
  Status FeedRows(std::span<const uint32_t> tokens, uint32_t rows, const StepContext& ctx,
                  RowSteps* out) override;
  Status Evict(uint32_t from, uint32_t count) override { return inner_.Evict(from, count); }
  void ExpectChainedSteps(uint32_t steps) override { inner_.ExpectChainedSteps(steps); }
  uint32_t CacheLength() const override { return inner_.CacheLength(); }
  std::span<const Digest> StepTrace() const override { return inner_.StepTrace(); }

  // Mean wall milliseconds per decode step (0 if none).
  double mean_step_ms() const { return steps_ ? total_ms_ / steps_ : 0; }
  int steps() const { return steps_; }
  // When the first Feed returned: wall clock and process CPU seconds.
  std::optional<Clock::time_point> first_feed_done() const { return first_done_; }
  double first_feed_done_cpu_s() const { return first_done_cpu_s_; }

 private:
  // Books one forwarded call that took [start, end) for `tokens` tokens.
  // A call after the first with tokens == 1 (FeedRows passes 1) counts as
  // `steps` decode steps.
  void Record(Clock::time_point start, Clock::time_point end, size_t tokens, size_t steps = 1);

  StepBackend& inner_;
  double total_ms_ = 0;
  int steps_ = 0;
  std::optional<Clock::time_point> first_done_;
  double first_done_cpu_s_ = 0;
};

// This process's CPU time (user + system, every thread), in seconds.
double ProcessCpuSeconds();

}  // namespace lockstep::runtime
