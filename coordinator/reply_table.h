// ReplyTable: the coordinator's book of the replies it owes sessions. Per
// session it holds at most one awaited reply (the step asked for, its
// deadline and the promise to resolve), the first error of the session
// that no reply awaited (sticky: the session's next request fails with it
// rather than being sent), and the relayed steps a request asked for
// ([next, last], with the results that came before anyone asked for them,
// kept in step order).
//
// A reply resolves only the awaited step it names: a reply of another step
// is stale and dropped, unless it is the next relayed step to come, which
// is kept. Pure bookkeeping: no sockets, no clock of its own (the caller
// passes the times).
//
// Thread-compatible: the coordinator's I/O loop owns it. Every promise it
// is given is resolved exactly once, by a reply, a failure or Expire —
// unless the same session awaits again first (a caller's bug).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>

#include "base/status.h"
#include "coordinator/session_link.h"
#include "wire/messages.h"

namespace lockstep {

class ReplyTable {
 public:
  using ReplyResult = SessionLink::ReplyResult;
  using Promise = std::shared_ptr<std::promise<ReplyResult>>;
  using Clock = std::chrono::steady_clock;

  // A request for (session, step) was sent asking for `relay` relayed
  // steps after it (0: none, which ends any relay of the session); its
  // reply is awaited until `deadline`.
  void Sent(uint64_t session, uint32_t step, uint32_t relay, Clock::time_point deadline,
            Promise promise);
  // For an Expect of relayed step (session, step): its result if it came
  // already (taken), nullopt if it is still to come (Await it), or Invalid
  // when no request asked for that step to be relayed.
  Result<std::optional<wire::StepResult>> TakeRelayed(uint64_t session, uint32_t step);
  // Awaits the reply of (session, step) until `deadline`.
  void Await(uint64_t session, uint32_t step, Clock::time_point deadline, Promise promise);

  // The session's sticky error, taken (Ok if none).
  Status TakeSticky(uint64_t session);
  // The session was released: its sticky error and relays are forgotten.
  void Release(uint64_t session);
  // Every sticky error is forgotten (the sessions rebuild under new ids).
  void ClearSticky() { sticky_.clear(); }

  // Replies from the last stage.
  void OnLogits(wire::Logits logits);
  void OnStepResult(wire::StepResult result);
  // An error a worker reported for `session`: fails its awaited reply, or
  // else becomes its sticky error (the first one is kept).
  void OnSessionError(uint64_t session, const Status& st);
  // Fails the session's awaited reply, if any (nothing sticks).
  void Fail(uint64_t session, const Status& st);
  void FailAll(const Status& st);
  // Fails every awaited reply whose deadline is not after `now`, with
  // why(session, step).
  void Expire(Clock::time_point now, const std::function<Status(uint64_t, uint32_t)>& why);

  // The earliest deadline of an awaited reply, or `bound` if later or none.
  Clock::time_point NextDeadline(Clock::time_point bound) const;
  // Some reply is awaited.
  bool awaiting() const { return !pending_.empty(); }
  // The step of the session's awaited reply, if one is awaited.
  std::optional<uint32_t> AwaitedStep(uint64_t session) const;
  // The session has a relay with steps still to come.
  bool Relaying(uint64_t session) const { return relays_.count(session) > 0; }

 private:
  struct Pending {
    uint32_t step = 0;
    Clock::time_point deadline;
    Promise promise;
  };
  struct Relay {
    uint32_t next = 0;  // the first relayed step not yet handed out
    uint32_t last = 0;
    std::deque<wire::StepResult> early;  // steps next, next+1, ... that came first
  };

  void Resolve(uint64_t session, ReplyResult result);
  // A StepResult nobody awaits yet: kept when it is the next relayed step to come.
  void KeepRelayed(wire::StepResult& result);
  // The relay bookkeeping once the result of (session, step) is handed out.
  void RelayTaken(uint64_t session, uint32_t step);

  std::map<uint64_t, Pending> pending_;
  std::map<uint64_t, Status> sticky_;
  std::map<uint64_t, Relay> relays_;
};

}  // namespace lockstep
