#include "engine/draft_proposals.h"

#include <algorithm>

#include "engine/ops/kernels.h"

namespace lockstep {

DraftProposals::DraftProposals(const Stage& stage, uint32_t max_positions, size_t reserve_positions)
    : backend_(stage, reserve_positions), max_positions_(max_positions) {}

Status DraftProposals::RollBackTo(std::span<const uint32_t> history) {
  const size_t common = static_cast<size_t>(
      std::mismatch(cached_.begin(), cached_.end(), history.begin(), history.end()).first -
      cached_.begin());
  const size_t keep = std::min(common, history.size() - 1);
  if (keep < cached_.size()) {
    const Status st = backend_.Evict(static_cast<uint32_t>(keep), static_cast<uint32_t>(cached_.size() - keep));
    if (!st.ok()) return st.WithContext("draft model");
    cached_.resize(keep);
  }
  return Status::Ok();
}

Status DraftProposals::Propose(std::span<const uint32_t> history, size_t max_tokens,
                               std::vector<uint32_t>* out) {
  out->clear();
  if (history.empty()) return Status::Ok();
  if (max_positions_ != 0) {  // the cache ends holding history and all guesses but the last
    if (history.size() >= max_positions_) return Status::Ok();
    max_tokens = std::min<size_t>(max_tokens, max_positions_ - history.size());
  }
  if (max_tokens == 0) return Status::Ok();
  LOCKSTEP_RETURN_IF_ERROR(RollBackTo(history));
  const std::span<const uint32_t> unseen = history.subspan(cached_.size());
  Status st = backend_.Feed(unseen, &logits_);
  if (!st.ok()) return st.WithContext("draft model");
  cached_.insert(cached_.end(), unseen.begin(), unseen.end());
  for (;;) {
    const uint32_t guess = ops::ArgmaxFirst(logits_.data(), logits_.size());
    out->push_back(guess);
    if (out->size() == max_tokens) return Status::Ok();
    st = backend_.Feed(std::span<const uint32_t>(&guess, 1), &logits_);
    if (!st.ok()) return st.WithContext("draft model");
    cached_.push_back(guess);
  }
}

}  // namespace lockstep
