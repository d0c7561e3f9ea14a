#include "base/step_timeline.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace lockstep::timeline {
namespace {

struct Entry {
  Event event;
  uint32_t stage;
  uint64_t session;
  uint32_t step;
  uint64_t ns;
};

constexpr size_t kCapacity = 1 << 18;

// Written out at exit (never freed: a late mark must not touch freed memory).
class Log {
 public:
  void Dump() {
    const size_t n = std::min(next_.load(), kCapacity);
    if (n == 0 || Prefix() == nullptr) return;
    const std::string path = std::string(Prefix()) + "." + std::to_string(getpid());
    FILE* f = std::fopen(path.c_str(), "w");
    if (f == nullptr) return;
    for (size_t i = 0; i < n; ++i) {
      const Entry& m = marks_[i];
      std::fprintf(f, "%u %u %llu %u %llu\n", static_cast<unsigned>(m.event), m.stage,
                   static_cast<unsigned long long>(m.session), m.step,
                   static_cast<unsigned long long>(m.ns));
    }
    std::fclose(f);
  }
  void Add(const Entry& m) {
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i < kCapacity) marks_[i] = m;
  }

 private:
  std::atomic<size_t> next_{0};
  Entry marks_[kCapacity];
};

Log& TheLog() {
  static Log* log = new Log;
  return *log;
}

}  // namespace

const char* Prefix() {
  static const char* prefix = [] {
    const char* p = std::getenv("LOCKSTEP_STEP_TIMELINE");
    if (p == nullptr || *p == '\0') return static_cast<const char*>(nullptr);
    TheLog();
    std::atexit([] { TheLog().Dump(); });
    return p;
  }();
  return prefix;
}

uint64_t Now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void RecordAt(Event event, uint32_t stage, uint64_t session, uint32_t step, uint64_t ns) {
  TheLog().Add(Entry{event, stage, session, step, ns});
}

}  // namespace lockstep::timeline
