// ComputeQueue: the works a worker's I/O thread hands its compute thread
// (worker/worker.h), and where each decode step runs.
//   - Order: works reach the compute thread in the order they were handed
//     over, so a session's messages keep their order. Steps held to run
//     inline go before any later work (Enqueue hands them over first).
//   - Inline: a decode step (as `is_decode_step` says: StageHost's
//     IsDecodeStep) is held for the I/O thread to run itself only while
//     nothing is queued or running on the compute thread (the I/O thread
//     may then use the StageHost), fewer than max_batch steps are held,
//     the last decode pass on either thread took at most kMaxInlineStep
//     (an inline pass holds heartbeats back; the first pass, of unknown
//     length, runs on the compute thread), and no batch window is set.
//   - Batching: the compute thread takes a work and, when it is a decode
//     step, every decode step queued right behind it (waiting up to the
//     batch window for more), up to max_batch; the first other work ends
//     the run and is taken too, to be applied after it. A run is split
//     where a session repeats (MustFlushBefore): one pass holds distinct
//     sessions' steps only.
// Thread-safety: Submit, Enqueue, TakeHeld, held and CanRunInline on the
// I/O thread; Take and Done on the compute thread; RecordPass and Stop on
// either.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "base/mailbox.h"
#include "base/status.h"
#include "wire/messages.h"

namespace lockstep {

// One work for the compute thread.
struct ComputeWork {
  enum class Kind { kMessage, kFail, kDropSessions, kStop };
  Kind kind = Kind::kMessage;
  wire::Message message;
  uint64_t session_id = 0;  // kFail
  Status failure;           // kFail
};

class ComputeQueue {
 public:
  // An inline decode pass may hold heartbeats back this long at most.
  static constexpr std::chrono::nanoseconds kMaxInlineStep = std::chrono::milliseconds(100);

  // is_decode_step: called on the I/O thread only while the compute thread
  // is idle, and on the compute thread. max_batch: steps per pass (>= 1).
  ComputeQueue(std::function<bool(const wire::Message&)> is_decode_step, size_t max_batch,
               std::chrono::milliseconds batch_window);
  // False if the queue's eventfd could not be made.
  bool ok() const { return inbox_.ok(); }

  // I/O thread: holds `work` to run inline when CanRunInline, else Enqueue.
  void Submit(ComputeWork work);
  // I/O thread: hands any held steps and then `work` to the compute thread.
  void Enqueue(ComputeWork work);
  bool CanRunInline(const ComputeWork& work) const;
  size_t held() const { return held_.size(); }
  // I/O thread: the held steps, in arrival order, into *works (replaced).
  void TakeHeld(std::vector<ComputeWork>* works);

  // Compute thread: waits up to `timeout` for a work, then takes it and the
  // decode steps that batch with it (file comment) into *works (replaced).
  // False when none came.
  bool Take(std::chrono::milliseconds timeout, std::vector<ComputeWork>* works);
  // Compute thread: `n` works taken are applied; at 0 outstanding the I/O
  // thread may use the StageHost again.
  void Done(size_t n) { queued_.fetch_sub(n, std::memory_order_release); }
  // The wall time of the decode pass that just ran (either thread).
  void RecordPass(std::chrono::nanoseconds took) {
    last_pass_nanos_.store(took.count(), std::memory_order_relaxed);
  }
  // Asks the compute thread to stop after what is queued (any thread).
  void Stop() { inbox_.Push(ComputeWork{ComputeWork::Kind::kStop, {}, 0, {}}); }

  // Whether the pending `batch` (decode steps of distinct sessions) must run
  // before decode step `step` joins it: step's session is in it, or it is full.
  static bool MustFlushBefore(std::span<const wire::Message* const> batch,
                              const wire::Message& step, size_t max_batch);

 private:
  bool IsDecode(const ComputeWork& w) const {
    return w.kind == ComputeWork::Kind::kMessage && is_decode_step_(w.message);
  }

  std::function<bool(const wire::Message&)> is_decode_step_;
  size_t max_batch_;
  std::chrono::milliseconds batch_window_;
  Mailbox<ComputeWork> inbox_;
  // Works pushed to inbox_ and not yet applied: 0 means the compute thread
  // is idle and the I/O thread may use the host (acquire/release).
  std::atomic<size_t> queued_{0};
  std::vector<ComputeWork> held_;  // I/O thread: decode steps read this wake
  // Wall time of the last decode pass on either thread; none yet: the most.
  std::atomic<int64_t> last_pass_nanos_{INT64_MAX};
};

}  // namespace lockstep
