#include "worker/compute_queue.h"

#include <algorithm>
#include <optional>

#include "worker/session_table.h"

namespace lockstep {

using std::chrono::milliseconds;

ComputeQueue::ComputeQueue(std::function<bool(const wire::Message&)> is_decode_step,
                           size_t max_batch, milliseconds batch_window)
    : is_decode_step_(std::move(is_decode_step)),
      max_batch_(std::max<size_t>(1, max_batch)),
      batch_window_(batch_window) {
  held_.reserve(max_batch_);
}

bool ComputeQueue::CanRunInline(const ComputeWork& work) const {
  // In this order: the host is the I/O thread's to ask only when idle.
  return batch_window_.count() == 0 &&
         last_pass_nanos_.load(std::memory_order_relaxed) <= kMaxInlineStep.count() &&
         queued_.load(std::memory_order_acquire) == 0 && held_.size() < max_batch_ &&
         IsDecode(work);
}

void ComputeQueue::Submit(ComputeWork work) {
  if (CanRunInline(work)) {
    held_.push_back(std::move(work));  // run once this wake's frames are read
    return;
  }
  Enqueue(std::move(work));
}

void ComputeQueue::Enqueue(ComputeWork work) {
  for (ComputeWork& w : held_) {  // earlier arrivals go first
    queued_.fetch_add(1, std::memory_order_relaxed);
    inbox_.Push(std::move(w));
  }
  held_.clear();
  queued_.fetch_add(1, std::memory_order_relaxed);
  inbox_.Push(std::move(work));
}

void ComputeQueue::TakeHeld(std::vector<ComputeWork>* works) {
  works->swap(held_);
  held_.clear();
}

bool ComputeQueue::Take(milliseconds timeout, std::vector<ComputeWork>* works) {
  std::optional<ComputeWork> first = inbox_.PopWait(timeout);
  if (!first) return false;
  works->clear();
  const bool decode = IsDecode(*first);
  works->push_back(std::move(*first));
  if (!decode || max_batch_ <= 1) return true;
  const auto deadline = std::chrono::steady_clock::now() + batch_window_;
  for (size_t steps = 1; steps < max_batch_; ++steps) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - std::chrono::steady_clock::now());
    std::optional<ComputeWork> next = inbox_.PopWait(std::max(left, milliseconds(0)));
    if (!next) return true;
    const bool more = IsDecode(*next);
    works->push_back(std::move(*next));
    if (!more) return true;  // applied after the batch, in order
  }
  return true;
}

bool ComputeQueue::MustFlushBefore(std::span<const wire::Message* const> batch,
                                   const wire::Message& step, size_t max_batch) {
  if (batch.size() >= max_batch) return true;
  bool has = false;
  const uint64_t session = SessionOfMessage(step, &has);
  return std::any_of(batch.begin(), batch.end(), [&](const wire::Message* m) {
    return SessionOfMessage(*m, &has) == session;
  });
}

}  // namespace lockstep
