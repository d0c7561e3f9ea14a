// SessionLink: what a RemoteSession needs of the cluster it runs on — its
// requests sent to the first stage and their replies awaited, session
// control posted down the pipeline, fresh session ids, the recovery epoch
// and the model's shape. The Coordinator is one; a test can be another and
// drive a RemoteSession with no worker at all.
//
// Contract (what RemoteSession relies on): Request resolves with the
// Logits or StepResult of exactly (session, step), an ErrorReport for the
// session, or a failure; Expect likewise for a step a Request asked to be
// relayed (Invalid for any other); Post sends in the order posted, after
// everything posted or requested before; Await never waits longer than the
// link's own bound. epoch() counts recoveries: a session built at an older
// epoch must rebuild itself before its next step.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <future>
#include <variant>

#include "base/status.h"
#include "engine/io/model_config.h"
#include "wire/messages.h"

namespace lockstep {

class SessionLink {
 public:
  // What the last stage answers for a step: its logits, or (for a step
  // that carried a chain handoff) its StepResult.
  using StepReply = std::variant<wire::Logits, wire::StepResult>;
  using ReplyResult = Result<StepReply>;

  virtual ~SessionLink() = default;

  // Sends `frame` (a TokenInput of (session, step)) to the first stage.
  // relay: the frame asks for that many relayed steps after this one
  // (steps step+1 .. step+relay), whose StepResults Expect collects.
  virtual std::future<ReplyResult> Request(uint64_t session, uint32_t step, wire::Frame frame,
                                           uint32_t relay) = 0;
  // The StepResult of a relayed step (sends nothing).
  virtual std::future<ReplyResult> Expect(uint64_t session, uint32_t step) = 0;
  // Sends session control to the first stage (forwarded down the pipeline
  // in order). release: forget the session's pending errors and relays.
  virtual void Post(uint64_t session, wire::Frame frame, bool release) = 0;
  // Waits for a Request's or Expect's reply; Timeout naming (session, step)
  // when it did not come within the link's bound.
  virtual ReplyResult Await(std::future<ReplyResult> reply, uint64_t session, uint32_t step) = 0;
  virtual uint64_t NewSessionId() = 0;
  // Recoveries started so far.
  virtual uint64_t epoch() const = 0;
  // Waits until no recovery is in progress: Ok, or why the cluster is
  // broken, or Timeout.
  virtual Status AwaitRecovery() const = 0;
  // Ok, or why the cluster cannot serve any more.
  virtual Status health() const = 0;
  // The cluster ships logits: the session chooses tokens itself.
  virtual bool ship_logits() const = 0;
  virtual const ModelConfig& model_config() const = 0;
};

}  // namespace lockstep
