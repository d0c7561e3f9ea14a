// ClusterBatchStepper: the BatchStepper (engine/batch_stepper.h) of
// sessions on a cluster, each a DecodeSession over a RemoteSession of one
// Coordinator. A step sends every session's work before awaiting any:
// prompt chunks that choose nothing are posted without a reply
// (RemoteSession::FeedWithoutOutput), and the choosing steps go as one
// RemoteSession::FeedAndChooseAll round, so the workers find them queued
// together and batch them. No thread is started per session or per step.
// Thread-compatible: one thread steps it.
#pragma once

#include <vector>

#include "coordinator/coordinator.h"
#include "engine/batch_stepper.h"

namespace lockstep::runtime {

class ClusterBatchStepper final : public BatchStepper {
 public:
  // REQUIRES: every session's backend is a RemoteSession (else its status
  // says so).
  size_t Step(std::span<DecodeSession* const> batch, size_t prompt_budget,
              std::span<Status> status) override;

 private:
  std::vector<RemoteSession::BatchedStep> round_;
  std::vector<std::pair<size_t, std::span<const uint32_t>>> choose_;  // (session, its tokens)
  std::vector<StepOutcome> outcomes_;
  std::vector<Status> got_;
};

}  // namespace lockstep::runtime
