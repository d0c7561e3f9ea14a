// FramePool: frames handed back after sending, so that a thread producing
// one frame per step (a worker's compute thread) reuses their storage
// instead of allocating. The producer Takes a frame and marshals into it
// (MarshalHidden/MarshalStepResult with an output frame); whoever sends it
// Gives it back. Holds at most `capacity` frames; a Take with none waiting
// returns an empty frame (the one allocation is then the marshal's).
//
// Thread-safe: Take and Give may run on different threads. Neither
// allocates once the pool's own list is reserved (at construction).
#pragma once

#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include "wire/envelope.h"

namespace lockstep::wire {

class FramePool {
 public:
  explicit FramePool(size_t capacity = 64) : capacity_(capacity) { free_.reserve(capacity); }
  FramePool(const FramePool&) = delete;
  FramePool& operator=(const FramePool&) = delete;

  // A frame whose storage was used before, or an empty one.
  Frame Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.empty()) return Frame();
    Frame f = std::move(free_.back());
    free_.pop_back();
    return f;
  }

  // Keeps `frame`'s storage for a later Take (dropped when the pool is full).
  void Give(Frame frame) {
    if (frame.capacity() == 0) return;
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < capacity_) free_.push_back(std::move(frame));
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return free_.size();
  }

 private:
  const size_t capacity_;
  mutable std::mutex mu_;
  std::vector<Frame> free_;
};

}  // namespace lockstep::wire
