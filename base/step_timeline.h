// StepTimeline: a measuring aid that timestamps the points a pipeline step
// passes (the coordinator's send, each worker's receive, compute start and
// end, send, the coordinator's receive) so that where a step's time goes
// can be read off afterwards (bench/step_timeline.py).
//
// Off unless the environment names a file prefix before the first mark:
//   LOCKSTEP_STEP_TIMELINE=/tmp/tl   -> each process writes /tmp/tl.<pid>
// at exit, one line per mark: "<event> <stage> <session> <step> <ns>", ns
// from CLOCK_MONOTONIC (one clock for every process of a host). When off, a
// mark costs one load and a predictable branch. When on, marks go to a
// fixed array (no allocation, no I/O while stepping); marks past its
// capacity are dropped. Thread-safe (marks may come from any thread).
#pragma once

#include <cstdint>

namespace lockstep::timeline {

enum class Event : uint32_t {
  kCoordinatorRequest,   // a session thread hands a step to the coordinator
  kCoordinatorSend,      // the coordinator's I/O thread starts sending it to stage 0
  kCoordinatorReceive,   // its I/O thread received the reply
  kCoordinatorResolved,  // the session thread has the reply
  kWorkerReceive,        // a worker took the frame off its socket
  kWorkerAdmitted,       // parsed, verified and admitted
  kComputeStart,         // the stage starts the step
  kComputeEnd,           // its output frame is marshalled
  kWorkerSend,           // the I/O thread starts sending it
  kWorkerSent,           // ... and handed it to the transport (the receiver may
                         // have it already: a hop is measured from kWorkerSend)
  kWorkerRelay,          // the last stage starts sending the step, relayed, to the first
};

// The file prefix, or null when marks are not recorded.
const char* Prefix();
// CLOCK_MONOTONIC in nanoseconds.
uint64_t Now();
// A mark at `ns` (a time taken earlier with Now()).
void RecordAt(Event event, uint32_t stage, uint64_t session, uint32_t step, uint64_t ns);
inline void Record(Event event, uint32_t stage, uint64_t session, uint32_t step) {
  RecordAt(event, stage, session, step, Now());
}

// True when marks are recorded (LOCKSTEP_STEP_TIMELINE is set).
inline bool Enabled() {
  static const bool enabled = Prefix() != nullptr;
  return enabled;
}

inline void Mark(Event event, uint32_t stage, uint64_t session, uint32_t step) {
  if (Enabled()) Record(event, stage, session, step);
}
// Now() when marks are recorded, else 0 (for a MarkAt later).
inline uint64_t NowIfEnabled() { return Enabled() ? Now() : 0; }
inline void MarkAt(Event event, uint32_t stage, uint64_t session, uint32_t step, uint64_t ns) {
  if (Enabled()) RecordAt(event, stage, session, step, ns);
}

}  // namespace lockstep::timeline
