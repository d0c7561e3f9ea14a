#include "runtime/timed_backend.h"

#include <time.h>

namespace lockstep::runtime {

double ProcessCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) / 1e9;
}

Status TimedBackend::Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) {
  const Clock::time_point start = Clock::now();
  Status st = inner_.Feed(tokens, logits);
  const Clock::time_point end = Clock::now();
  if (!first_done_) {
    first_done_ = end;
    first_done_cpu_s_ = ProcessCpuSeconds();
  } else if (tokens.size() == 1) {
    total_ms_ += std::chrono::duration<double, std::milli>(end - start).count();
    steps_ += 1;
  }
  return st;
}

}  // namespace lockstep::runtime
