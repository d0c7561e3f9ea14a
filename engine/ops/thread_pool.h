// ThreadPool: a fixed set of persistent threads that split independent
// work (matrix rows, attention heads) — never one sum — between them.
//
// Created once by the program (no singleton) and passed to whoever
// computes. Every worker pins the FP environment (fp_env.h, §1.3) when it
// starts and Create fails if any pin does not read back; before each job a
// worker re-reads its control register and aborts loudly if the pin was
// lost. The calling thread takes part in every job, so a pool of size N
// runs N - 1 worker threads; it must itself be pinned.
//
// Chunks are claimed dynamically and the caller only waits for chunks
// that were claimed, so a descheduled worker never stalls a job (the
// caller does the work itself). Idle workers spin briefly (a decode step
// issues jobs microseconds apart), then sleep on a futex. ParallelFor is
// thread-safe: concurrent callers are serialised. Not copyable or movable.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "base/status.h"

namespace lockstep::ops {

class ThreadPool {
 public:
  // threads >= 1 (including the caller). Internal error naming the worker
  // if a worker thread cannot pin its FP environment.
  static Result<std::unique_ptr<ThreadPool>> Create(size_t threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  size_t size() const { return workers_.size() + 1; }

  // Calls fn(begin, end, thread) on chunks [begin, end) of [0, n), at most
  // `grain` long, claimed dynamically; thread < size() identifies the
  // executing thread (for per-thread scratch). Returns when all are done.
  // REQUIRES: not called from inside a ParallelFor body (no nesting).
  template <class F>
  void ParallelFor(size_t n, size_t grain, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    auto body = [](void* ctx, size_t b, size_t e, size_t t) { (*static_cast<Fn*>(ctx))(b, e, t); };
    Run(n, grain == 0 ? 1 : grain, body, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using Body = void (*)(void* ctx, size_t begin, size_t end, size_t thread);
  explicit ThreadPool(size_t threads);
  void Run(size_t n, size_t grain, Body body, void* ctx);
  void WorkerLoop(size_t thread);
  void Work(size_t thread);

  std::mutex run_mu_;                  // one job at a time
  // The current job's claim word: [generation:24][next chunk:20][chunks:20].
  // Threads claim a chunk by CAS, so a thread that arrives after the job
  // was fully claimed (or replaced) claims nothing and is never waited for.
  std::atomic<uint64_t> state_{0};
  std::atomic<uint32_t> done_{0};      // chunks of the current job finished
  std::atomic<uint32_t> wake_{0};      // bumped (and notified) per job
  std::atomic<bool> stop_{false};
  uint64_t generation_ = 0;            // under run_mu_
  size_t n_ = 0, grain_ = 1;           // the current job, set under run_mu_
  Body body_ = nullptr;
  void* ctx_ = nullptr;
  std::vector<Status> start_status_;   // [workers], each worker's pin result
  std::atomic<size_t> started_{0};
  std::vector<std::thread> workers_;
};

// Runs fn over [0, n) on the pool, or inline (thread 0) when pool is null.
template <class F>
void ForEachChunk(ThreadPool* pool, size_t n, size_t grain, F&& fn) {
  if (pool == nullptr || pool->size() == 1 || n <= grain) {
    if (n > 0) fn(size_t{0}, n, size_t{0});
    return;
  }
  pool->ParallelFor(n, grain, fn);
}

// Calls fn(i) -- or fn(i, thread), thread < pool size identifying the
// executing thread as ParallelFor's does -- once for every i in [0, n), on
// the pool or inline. [0, n) is cut into one contiguous run per pool
// thread; the thread that claims a run walks it from its front, and a
// thread whose runs are done takes items one at a time from the backs of
// the others. So each thread goes through consecutive items (a prefetch
// reaching past the item it is on fetches its own next one, not another
// thread's), an item costs a claim on the thread's own run rather than on
// a counter every thread contends for, and the job ends when its last item
// does, not when its slowest run does.
template <class F>
void ForEachInRuns(ThreadPool* pool, size_t n, F&& fn) {
  constexpr size_t kMaxRuns = 64;
  auto call = [&fn](size_t i, size_t thread) {
    if constexpr (std::is_invocable_v<F&, size_t, size_t>) {
      fn(i, thread);
    } else {
      (void)thread;
      fn(i);
    }
  };
  const size_t runs = pool == nullptr ? 1 : std::min({pool->size(), kMaxRuns, n});
  if (n > 0xFFFFFFFFu) {  // beyond what a run's packed bounds hold: plain chunks
    return ForEachChunk(pool, n, 1, [&](size_t b, size_t e, size_t thread) {
      for (size_t i = b; i < e; ++i) call(i, thread);
    });
  }
  if (runs <= 1) {
    for (size_t i = 0; i < n; ++i) call(i, 0);
    return;
  }
  // Run r: [front, back) packed as front << 32 | back; owners advance the
  // front, others take from the back, both by CAS so no item runs twice.
  std::array<std::atomic<uint64_t>, kMaxRuns> run;
  for (size_t r = 0; r < runs; ++r) {
    run[r].store(uint64_t{r * n / runs} << 32 | (r + 1) * n / runs, std::memory_order_relaxed);
  }
  auto take = [&](size_t r, bool from_front) -> std::optional<size_t> {
    uint64_t s = run[r].load();
    for (;;) {
      const uint64_t front = s >> 32, back = s & 0xFFFFFFFFu;
      if (front >= back) return std::nullopt;
      const uint64_t next = from_front ? (front + 1) << 32 | back : front << 32 | (back - 1);
      if (run[r].compare_exchange_weak(s, next)) return from_front ? front : back - 1;
    }
  };
  pool->ParallelFor(runs, 1, [&](size_t b, size_t e, size_t thread) {
    for (size_t r = b; r < e; ++r) {
      while (std::optional<size_t> i = take(r, true)) call(*i, thread);
    }
    for (size_t k = 1; k < runs; ++k) {
      const size_t r = (e - 1 + k) % runs;
      while (std::optional<size_t> i = take(r, false)) call(*i, thread);
    }
  });
}

}  // namespace lockstep::ops
