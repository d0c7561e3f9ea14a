#include "engine/ops/thread_pool.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "engine/ops/fp_env.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace lockstep::ops {
namespace {

void CpuRelax() {
#if defined(__x86_64__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

constexpr auto kSpin = std::chrono::microseconds(300);

void RequirePinned(size_t thread) {
  if (!FpEnvironmentPinned()) {
    std::fprintf(stderr, "lockstep: FTZ/DAZ pin lost on pool thread %zu; refusing to compute\n",
                 thread);
    std::abort();
  }
}

}  // namespace

ThreadPool::ThreadPool(size_t threads) : start_status_(threads - 1, Status::Ok()) {}

Result<std::unique_ptr<ThreadPool>> ThreadPool::Create(size_t threads) {
  if (threads == 0) return InvalidError("thread pool needs at least one thread");
  std::unique_ptr<ThreadPool> pool(new ThreadPool(threads));
  for (size_t i = 1; i < threads; ++i) pool->workers_.emplace_back([p = pool.get(), i] { p->WorkerLoop(i); });
  while (pool->started_.load() < threads - 1) std::this_thread::yield();
  for (size_t i = 0; i + 1 < threads; ++i) {
    if (!pool->start_status_[i].ok()) {
      return InternalError("thread pool worker " + std::to_string(i + 1) +
                           " could not pin FTZ/DAZ: " + pool->start_status_[i].ToString());
    }
  }
  return pool;
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  wake_.fetch_add(1);
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ThreadPool::WorkerLoop(size_t thread) {
  Status pin = PinFpEnvironment();
  if (pin.ok() && !FpEnvironmentPinned()) pin = InternalError("pin did not read back");
  const bool ok = pin.ok();
  start_status_[thread - 1] = std::move(pin);
  uint32_t seen = wake_.load();
  started_.fetch_add(1);
  while (true) {
    const auto start = std::chrono::steady_clock::now();
    for (unsigned spins = 0; wake_.load() == seen; ++spins) {
      CpuRelax();
      if ((spins & 255) == 255 && std::chrono::steady_clock::now() - start > kSpin) {
        wake_.wait(seen);
      }
    }
    seen = wake_.load();
    if (stop_.load()) return;
    if (!ok) std::abort();  // Create already reported it; never compute unpinned
    RequirePinned(thread);
    Work(thread);
  }
}

void ThreadPool::Work(size_t thread) {
  constexpr uint64_t kMask = (uint64_t{1} << 20) - 1;
  uint64_t s = state_.load();
  while (((s >> 20) & kMask) < (s & kMask)) {
    if (!state_.compare_exchange_weak(s, s + (uint64_t{1} << 20))) continue;
    const size_t b = static_cast<size_t>((s >> 20) & kMask) * grain_;
    body_(ctx_, b, b + grain_ < n_ ? b + grain_ : n_, thread);
    done_.fetch_add(1);
    s = state_.load();
  }
}

void ThreadPool::Run(size_t n, size_t grain, Body body, void* ctx) {
  constexpr size_t kMaxChunks = (size_t{1} << 20) - 1;
  if (n == 0) return;
  std::lock_guard<std::mutex> lock(run_mu_);
  RequirePinned(0);
  if ((n + grain - 1) / grain > kMaxChunks) grain = (n + kMaxChunks - 1) / kMaxChunks;
  const uint64_t chunks = (n + grain - 1) / grain;
  n_ = n;
  grain_ = grain;
  body_ = body;
  ctx_ = ctx;
  done_.store(0);
  generation_ = (generation_ + 1) & 0xFFFFFF;
  state_.store(generation_ << 40 | chunks);
  wake_.fetch_add(1);
  wake_.notify_all();
  Work(0);
  for (unsigned spins = 0; done_.load() != chunks; ++spins) {
    CpuRelax();
    if ((spins & 255) == 255) std::this_thread::yield();
  }
}

}  // namespace lockstep::ops
