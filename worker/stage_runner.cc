#include "worker/stage_runner.h"

#include <thread>

#include "base/step_timeline.h"

namespace lockstep {

StageRunner::StageRunner(StageHost& host, ComputeQueue& queue, Options options,
                         std::function<void(std::vector<Outgoing>*)> publish,
                         std::function<void(const std::string&)> log)
    : host_(host),
      queue_(queue),
      options_(options),
      publish_(std::move(publish)),
      log_(std::move(log)) {
  batch_.reserve(host_.max_batch());
}

bool StageRunner::Run(std::vector<ComputeWork>& works) {
  if (timeline::Enabled()) MarkComputeStart(works);
  for (ComputeWork& work : works) {
    if (!Apply(work)) return false;
  }
  FlushBatch();
  return true;
}

void StageRunner::MarkComputeStart(const std::vector<ComputeWork>& works) const {
  for (const ComputeWork& w : works) {
    bool has = false;
    const uint64_t session = StageHost::SessionOf(w.message, &has);
    if (w.kind == ComputeWork::Kind::kMessage && has) {
      timeline::Record(timeline::Event::kComputeStart, host_.stage_index(), session,
                       StageHost::StepOf(w.message));
    }
  }
}

bool StageRunner::Apply(ComputeWork& work) {
  if (work.kind == ComputeWork::Kind::kMessage && host_.IsDecodeStep(work.message)) {
    if (ComputeQueue::MustFlushBefore(batch_, work.message, host_.max_batch())) FlushBatch();
    batch_.push_back(&work.message);
    return true;
  }
  FlushBatch();
  switch (work.kind) {
    case ComputeWork::Kind::kStop:
      if (host_.batched_steps() > 0) {
        log_("ran " + std::to_string(host_.batched_steps()) + " batched decode pass(es) over " +
             std::to_string(host_.batched_rows()) + " rows");
      }
      return false;
    case ComputeWork::Kind::kFail:
      host_.FailSession(work.session_id, work.failure, &out_);
      break;
    case ComputeWork::Kind::kDropSessions:
      log_("the coordinator is gone; dropping " + std::to_string(host_.session_count()) +
           " session(s)");
      host_.DropSessions();
      break;
    case ComputeWork::Kind::kMessage:
      if (options_.load_delay.count() > 0 && std::holds_alternative<wire::Assign>(work.message)) {
        std::this_thread::sleep_for(options_.load_delay);
      }
      host_.Handle(work.message, &out_);
      break;
  }
  Publish();
  return true;
}

void StageRunner::FlushBatch() {
  if (batch_.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  if (options_.step_delay.count() > 0) std::this_thread::sleep_for(options_.step_delay);
  host_.HandleDecodeBatch(batch_, &out_);
  queue_.RecordPass(std::chrono::steady_clock::now() - start);
  batch_.clear();
  Publish();
}

void StageRunner::Publish() {
  publish_(&out_);
  out_.clear();
}

}  // namespace lockstep
