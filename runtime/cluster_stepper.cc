#include "runtime/cluster_stepper.h"

namespace lockstep::runtime {

size_t ClusterBatchStepper::Step(std::span<DecodeSession* const> batch, size_t prompt_budget,
                                 std::span<Status> status) {
  choose_.clear();
  size_t stepped = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    DecodeSession& s = *batch[i];
    auto* remote = dynamic_cast<RemoteSession*>(&s.backend());
    if (remote == nullptr) {
      status[i] = InvalidError("a batched cluster step of a session that is not on a cluster");
      continue;
    }
    const std::span<const uint32_t> tokens = s.NextTokens(&prompt_budget);
    if (tokens.empty()) continue;
    ++stepped;
    if (!s.Chooses(tokens.size())) {  // a prompt chunk before the last: nothing to await
      if (status[i] = remote->FeedWithoutOutput(tokens); status[i].ok()) s.Fed(tokens.size());
      continue;
    }
    choose_.emplace_back(i, tokens);
  }
  outcomes_.assign(choose_.size(), StepOutcome{});
  got_.assign(choose_.size(), Status::Ok());
  round_.clear();
  for (size_t k = 0; k < choose_.size(); ++k) {
    DecodeSession& s = *batch[choose_[k].first];
    round_.push_back({static_cast<RemoteSession*>(&s.backend()), choose_[k].second, &s.Context(),
                      &outcomes_[k], &got_[k]});
  }
  RemoteSession::FeedAndChooseAll(round_);
  for (size_t k = 0; k < choose_.size(); ++k) {
    const size_t i = choose_[k].first;
    status[i] = got_[k].ok() ? batch[i]->Chose(choose_[k].second.size(), outcomes_[k]) : got_[k];
  }
  return stepped;
}

}  // namespace lockstep::runtime
