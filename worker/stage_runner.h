// StageRunner: applies the works a ComputeQueue hands out to a StageHost,
// in order — on the worker's compute thread, or the decode steps held to
// run inline on its I/O thread (worker/worker.h).
//   - A decode step joins the pending batch, which first runs when the
//     step's session is already in it or it is full
//     (ComputeQueue::MustFlushBefore); any other work first runs the
//     pending batch; the batch left at the end runs last. So no two
//     messages of one session change order.
//   - What each work or pass produced goes to `publish` right after it
//     ran, in order; each pass's wall time goes to the queue (RecordPass),
//     which decides from it whether later steps may run inline.
//   - kFail fails a session, kDropSessions frees every session (their
//     coordinator is gone), kStop ends the run (the works after it are not
//     applied).
// Thread-compatible: one thread at a time (the queue says which).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "worker/compute_queue.h"
#include "worker/outgoing.h"
#include "worker/stage_host.h"

namespace lockstep {

class StageRunner {
 public:
  struct Options {
    std::chrono::milliseconds load_delay{0};  // test hook: loading an Assign also sleeps this long
    std::chrono::milliseconds step_delay{0};  // test hook: every decode pass also sleeps this long
  };
  // publish: takes what to send (and may leave *out non-empty: it is
  // cleared after). log: one line for the worker's log.
  StageRunner(StageHost& host, ComputeQueue& queue, Options options,
              std::function<void(std::vector<Outgoing>* out)> publish,
              std::function<void(const std::string&)> log);

  // Applies `works` in order, then the pending batch; false at a kStop.
  bool Run(std::vector<ComputeWork>& works);

 private:
  // Applies one work (a decode step joins the batch); false on kStop.
  bool Apply(ComputeWork& work);
  void FlushBatch();
  void Publish();
  // Timeline marks (base/step_timeline.h) for the works about to run.
  void MarkComputeStart(const std::vector<ComputeWork>& works) const;

  StageHost& host_;
  ComputeQueue& queue_;
  Options options_;
  std::function<void(std::vector<Outgoing>*)> publish_;
  std::function<void(const std::string&)> log_;
  std::vector<Outgoing> out_;
  std::vector<const wire::Message*> batch_;  // decode steps of distinct sessions
};

}  // namespace lockstep
