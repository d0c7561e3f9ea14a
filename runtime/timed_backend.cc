#include "runtime/timed_backend.h"

#include <time.h>

#include "engine/row_step.h"

namespace lockstep::runtime {

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

void TimedBackend::Record(Clock::time_point start, Clock::time_point end, size_t tokens,
                          size_t steps) {
  if (!first_done_) {
    first_done_ = end;
    first_done_cpu_s_ = ProcessCpuSeconds();
  } else if (tokens == 1) {
    total_ms_ += std::chrono::duration<double, std::milli>(end - start).count();
    steps_ += static_cast<int>(steps);
  }
}

Status TimedBackend::Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) {
  const Clock::time_point start = Clock::now();
  Status st = inner_.Feed(tokens, logits);
  Record(start, Clock::now(), tokens.size());
  return st;
}

Result<StepOutcome> TimedBackend::FeedAndChoose(std::span<const uint32_t> tokens,
                                                const StepContext& ctx) {
  const Clock::time_point start = Clock::now();
  Result<StepOutcome> o = inner_.FeedAndChoose(tokens, ctx);
  Record(start, Clock::now(), tokens.size());
  return o;
}

}  // namespace lockstep::runtime

namespace lockstep::runtime {

Status TimedBackend::FeedRows(std::span<const uint32_t> tokens, uint32_t rows,
                              const StepContext& ctx, RowSteps* out) {
  const Clock::time_point start = Clock::now();
  Status st = inner_.FeedRows(tokens, rows, ctx, out);
  Record(start, Clock::now(), 1, out->steps.size());  // after the first call, decode steps
  return st;
}

}  // namespace lockstep::runtime
