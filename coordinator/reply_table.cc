#include "coordinator/reply_table.h"

#include <string>
#include <utility>

namespace lockstep {

void ReplyTable::Sent(uint64_t session, uint32_t step, uint32_t relay, Clock::time_point deadline,
                      Promise promise) {
  Await(session, step, deadline, std::move(promise));
  if (relay > 0) {
    relays_[session] = Relay{step + 1, step + relay, {}};
  } else {
    relays_.erase(session);
  }
}

Result<std::optional<wire::StepResult>> ReplyTable::TakeRelayed(uint64_t session, uint32_t step) {
  auto relay = relays_.find(session);
  if (relay == relays_.end() || step < relay->second.next || step > relay->second.last) {
    return InvalidError("session " + std::to_string(session) + " step " + std::to_string(step) +
                        ": no request asked for it to be relayed");
  }
  std::deque<wire::StepResult>& early = relay->second.early;
  if (early.empty() || early.front().step != step) return std::optional<wire::StepResult>();
  wire::StepResult result = std::move(early.front());
  early.pop_front();
  RelayTaken(session, step);
  return std::optional<wire::StepResult>(std::move(result));
}

void ReplyTable::Await(uint64_t session, uint32_t step, Clock::time_point deadline,
                       Promise promise) {
  pending_[session] = Pending{step, deadline, std::move(promise)};
}

Status ReplyTable::TakeSticky(uint64_t session) {
  auto it = sticky_.find(session);
  if (it == sticky_.end()) return Status::Ok();
  Status st = std::move(it->second);
  sticky_.erase(it);
  return st;
}

void ReplyTable::Release(uint64_t session) {
  sticky_.erase(session);
  relays_.erase(session);
}

void ReplyTable::OnLogits(wire::Logits logits) {
  auto it = pending_.find(logits.session_id);
  if (it == pending_.end() || it->second.step != logits.step) return;  // stale
  const uint64_t session = logits.session_id;
  Resolve(session, SessionLink::StepReply(std::move(logits)));
}

void ReplyTable::OnStepResult(wire::StepResult result) {
  auto it = pending_.find(result.session_id);
  if (it == pending_.end() || it->second.step != result.step) {
    return KeepRelayed(result);  // a relayed step to come, or stale
  }
  const uint64_t session = result.session_id;
  RelayTaken(session, result.step);
  Resolve(session, SessionLink::StepReply(std::move(result)));
}

void ReplyTable::OnSessionError(uint64_t session, const Status& st) {
  if (pending_.count(session)) return Resolve(session, st);
  sticky_.emplace(session, st);  // keeps the first error of a session
}

void ReplyTable::Fail(uint64_t session, const Status& st) { Resolve(session, st); }

void ReplyTable::FailAll(const Status& st) {
  for (auto& [id, p] : pending_) p.promise->set_value(st);
  pending_.clear();
}

void ReplyTable::Expire(Clock::time_point now,
                        const std::function<Status(uint64_t, uint32_t)>& why) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now < it->second.deadline) {
      ++it;
      continue;
    }
    it->second.promise->set_value(why(it->first, it->second.step));
    it = pending_.erase(it);
  }
}

ReplyTable::Clock::time_point ReplyTable::NextDeadline(Clock::time_point bound) const {
  for (const auto& [id, p] : pending_) bound = std::min(bound, p.deadline);
  return bound;
}

std::optional<uint32_t> ReplyTable::AwaitedStep(uint64_t session) const {
  auto it = pending_.find(session);
  if (it == pending_.end()) return std::nullopt;
  return it->second.step;
}

void ReplyTable::Resolve(uint64_t session, ReplyResult result) {
  auto it = pending_.find(session);
  if (it == pending_.end()) return;
  it->second.promise->set_value(std::move(result));
  pending_.erase(it);
}

void ReplyTable::KeepRelayed(wire::StepResult& result) {
  auto it = relays_.find(result.session_id);
  if (it == relays_.end()) return;
  Relay& r = it->second;
  const uint32_t expected = r.early.empty() ? r.next : r.early.back().step + 1;
  if (result.step != expected || result.step > r.last) return;
  r.early.push_back(std::move(result));
}

void ReplyTable::RelayTaken(uint64_t session, uint32_t step) {
  auto it = relays_.find(session);
  if (it == relays_.end() || step < it->second.next) return;
  it->second.next = step + 1;
  if (it->second.next > it->second.last) relays_.erase(it);
}

}  // namespace lockstep
