#include "engine/ops/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "engine/ops/fp_env.h"

namespace lockstep::ops {
namespace {

TEST(ThreadPool, CoversEveryIndexOnceOnPinnedThreads) {
  for (size_t threads : {1, 2, 3}) {
    auto pool = ThreadPool::Create(threads);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    EXPECT_EQ((*pool)->size(), threads);
    for (size_t n : {0, 1, 5, 1000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int> unpinned{0}, bad_thread{0};
      (*pool)->ParallelFor(n, 3, [&](size_t b, size_t e, size_t t) {
        if (!FpEnvironmentPinned()) unpinned.fetch_add(1);
        if (t >= threads || e - b > 3) bad_thread.fetch_add(1);
        for (size_t i = b; i < e; ++i) hits[i].fetch_add(1);
      });
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << i;
      EXPECT_EQ(unpinned.load(), 0);
      EXPECT_EQ(bad_thread.load(), 0);
    }
  }
}

TEST(ThreadPool, ManyShortJobsInARow) {
  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool.ok());
  std::atomic<size_t> sum{0};
  for (int j = 0; j < 20000; ++j) {
    (*pool)->ParallelFor(4, 1, [&](size_t b, size_t e, size_t) { sum.fetch_add(e - b); });
  }
  EXPECT_EQ(sum.load(), 80000u);
}

// Every item exactly once, whatever the pool, n, and which thread is slow
// (owners and the threads taking from the back of their runs race).
TEST(ThreadPool, ForEachInRunsCoversEveryItemOnce) {
  for (size_t threads : {1, 2, 3, 4}) {
    auto pool = ThreadPool::Create(threads);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    for (size_t n : {0, 1, 2, 3, 7, 48, 1000}) {
      for (int round = 0; round < 20; ++round) {
        std::vector<std::atomic<int>> hits(n);
        ForEachInRuns(pool->get(), n, [&](size_t i) {
          if (i % 7 == static_cast<size_t>(round) % 7) {  // a slow item: others steal meanwhile
            volatile int sink = 0;  // the loop is not optimised away
            for (int spin = 0; spin < 2000; ++spin) sink = sink + spin;
          }
          hits[i].fetch_add(1);
        });
        for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "item " << i << " of " << n;
      }
    }
  }
  ForEachInRuns(nullptr, 3, [](size_t) {});  // no pool: inline
}

// fn(i, thread): the thread index is the executing thread's (< pool
// size), so per-thread scratch indexed by it is never shared by two items
// running at once.
TEST(ThreadPool, ForEachInRunsGivesEachItemItsThreadsIndex) {
  for (size_t threads : {1, 2, 3}) {
    auto pool = ThreadPool::Create(threads);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    std::vector<std::atomic<int>> busy(threads), hits(500);
    std::atomic<bool> shared{false}, out_of_range{false};
    ForEachInRuns(pool->get(), hits.size(), [&](size_t i, size_t thread) {
      if (thread >= threads) {
        out_of_range = true;
        return;
      }
      if (busy[thread].fetch_add(1) != 0) shared = true;  // another item on this index right now
      volatile int sink = 0;
      for (int spin = 0; spin < 500; ++spin) sink = sink + spin;
      busy[thread].fetch_sub(1);
      hits[i].fetch_add(1);
    });
    EXPECT_FALSE(out_of_range.load());
    EXPECT_FALSE(shared.load());
    for (size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i].load(), 1) << i;
  }
  size_t seen = 99;
  ForEachInRuns(nullptr, 1, [&](size_t, size_t thread) { seen = thread; });  // inline: thread 0
  EXPECT_EQ(seen, 0u);
}

TEST(ThreadPool, ZeroThreadsIsInvalid) { EXPECT_FALSE(ThreadPool::Create(0).ok()); }

}  // namespace
}  // namespace lockstep::ops
