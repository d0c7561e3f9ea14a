// Outgoing: one message a StageHost wants sent, or a link it wants
// opened, addressed by role (the coordinator, the next stage, the first
// stage) rather than by socket; the Worker's I/O thread delivers it
// (worker/worker.h). Plain data.
#pragma once

#include <cstdint>
#include <string>

#include "wire/frame_pool.h"

namespace lockstep {

struct Outgoing {
  // kFirstStage: a relayed step, from the last stage to the first (itself
  // when it is both); kConnectRing: the first stage's endpoint for them.
  enum class To { kCoordinator, kNextStage, kConnectNext, kFirstStage, kConnectRing };
  To to = To::kCoordinator;
  wire::Frame frame;       // kCoordinator, kNextStage, kFirstStage
  std::string endpoint;    // kConnectNext/kConnectRing: the stage's endpoint
  std::string label;       // kConnectNext/kConnectRing: "stage K", for messages
  bool has_session = false;
  uint64_t session_id = 0;  // for reporting a failed send
  uint32_t step = 0;        // a step's output: its step (timeline marks)
};

}  // namespace lockstep
