#include "coordinator/session_history.h"

#include <cassert>

namespace lockstep {

void SessionHistory::Fed(std::span<const uint32_t> tokens) {
  fed_.insert(fed_.end(), tokens.begin(), tokens.end());
  ops_.push_back(Op{false, static_cast<uint32_t>(tokens.size()), 0});
  length_ += static_cast<uint32_t>(tokens.size());
}

void SessionHistory::Evicted(uint32_t from, uint32_t count) {
  assert(uint64_t{from} + count <= length_);
  ops_.push_back(Op{true, from, count});
  length_ -= count;
}

Status SessionHistory::Replay(const FeedFn& feed, const EvictFn& evict) const {
  uint32_t length = 0;
  size_t next = 0;
  for (const Op& op : ops_) {
    if (op.evict) {
      evict(op.a, op.b);
      length -= op.b;
      continue;
    }
    const std::span<const uint32_t> tokens(fed_.data() + next, op.a);
    next += op.a;
    LOCKSTEP_RETURN_IF_ERROR(feed(tokens, length));
    length += op.a;
  }
  return Status::Ok();
}

}  // namespace lockstep
