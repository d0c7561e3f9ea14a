// RemoteSession (declared in coordinator.h): the StepBackend of a sharded run.
#include "coordinator/coordinator.h"

namespace lockstep {

RemoteSession::RemoteSession(Coordinator& coordinator, uint64_t id, uint32_t cache_length)
    : coordinator_(coordinator), id_(id), length_(cache_length) {}

RemoteSession::~RemoteSession() {
  coordinator_.Post(id_, wire::MarshalMessage(wire::Release{id_}), /*release=*/true);
}

Status RemoteSession::Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) {
  if (tokens.empty()) return InvalidError("no tokens to feed");
  wire::TokenInput in;
  in.phase = tokens.size() > 1 ? wire::TokenInput::Phase::kPrefill
                               : wire::TokenInput::Phase::kDecode;
  in.session_id = id_;
  in.step = step_++;
  in.first_position = length_;
  in.token_ids.assign(tokens.begin(), tokens.end());
  std::future<Coordinator::LogitsResult> reply =
      coordinator_.Request(id_, in.step, wire::MarshalMessage(in));
  if (reply.wait_for(coordinator_.wait_bound()) != std::future_status::ready) {
    return TimeoutError("session " + std::to_string(id_) + " step " + std::to_string(in.step) +
                        ": the coordinator did not answer within " +
                        std::to_string(coordinator_.wait_bound().count()) + " ms");
  }
  Coordinator::LogitsResult got = reply.get();
  if (!got.ok()) return got.status();
  const uint32_t vocab = static_cast<uint32_t>(coordinator_.model_config().vocab_size);
  if (got->vocab != vocab) {
    return CorruptError("session " + std::to_string(id_) + ": the last stage sent " +
                        std::to_string(got->vocab) + " logits, the model has " +
                        std::to_string(vocab));
  }
  *logits = std::move(got->payload);
  length_ += static_cast<uint32_t>(tokens.size());
  return Status::Ok();
}

Status RemoteSession::Evict(uint32_t from, uint32_t count) {
  if (count == 0 || uint64_t{from} + count > length_) {
    return InvalidError("evict [" + std::to_string(from) + ", " +
                        std::to_string(uint64_t{from} + count) + ") of a cache of " +
                        std::to_string(length_) + " entries");
  }
  coordinator_.Post(id_, wire::MarshalMessage(wire::Evict{id_, from, count}), false);
  length_ -= count;
  return Status::Ok();
}

Result<std::unique_ptr<RemoteSession>> RemoteSession::Fork() {
  LOCKSTEP_RETURN_IF_ERROR(coordinator_.health());
  const uint64_t child = coordinator_.NewSessionId();
  coordinator_.Post(child, wire::MarshalMessage(wire::Fork{child, id_}), false);
  auto forked = std::make_unique<RemoteSession>(coordinator_, child, length_);
  forked->step_ = step_;
  return forked;
}

}  // namespace lockstep
