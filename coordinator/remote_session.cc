// RemoteSession (declared in coordinator.h): the StepBackend of a sharded run.
#include "coordinator/coordinator.h"

#include <bit>

namespace lockstep {
namespace {

bool SameSampling(const SamplingParams& a, const SamplingParams& b) {
  return std::bit_cast<uint32_t>(a.temperature) == std::bit_cast<uint32_t>(b.temperature) &&
         a.top_k == b.top_k && std::bit_cast<uint32_t>(a.top_p) == std::bit_cast<uint32_t>(b.top_p) &&
         a.seed == b.seed;
}

}  // namespace

RemoteSession::RemoteSession(Coordinator& coordinator, uint64_t id, uint32_t cache_length,
                             const SamplingParams& sampling)
    : coordinator_(coordinator), id_(id), length_(cache_length), sampling_(sampling) {}

RemoteSession::~RemoteSession() {
  coordinator_.Post(id_, wire::MarshalMessage(wire::Release{id_}), /*release=*/true);
}

Result<Coordinator::StepReply> RemoteSession::Send(std::span<const uint32_t> tokens,
                                                   std::optional<wire::ChainHandoff> handoff) {
  if (tokens.empty()) return InvalidError("no tokens to feed");
  wire::TokenInput in;
  in.phase = tokens.size() > 1 ? wire::TokenInput::Phase::kPrefill
                               : wire::TokenInput::Phase::kDecode;
  in.session_id = id_;
  in.step = step_++;
  in.first_position = length_;
  in.token_ids.assign(tokens.begin(), tokens.end());
  in.handoff = std::move(handoff);
  std::future<Coordinator::ReplyResult> reply =
      coordinator_.Request(id_, in.step, wire::MarshalMessage(in));
  if (reply.wait_for(coordinator_.wait_bound()) != std::future_status::ready) {
    return TimeoutError("session " + std::to_string(id_) + " step " + std::to_string(in.step) +
                        ": the coordinator did not answer within " +
                        std::to_string(coordinator_.wait_bound().count()) + " ms");
  }
  Coordinator::ReplyResult got = reply.get();
  if (!got.ok()) return got.status();
  length_ += static_cast<uint32_t>(tokens.size());
  return std::move(got).value();
}

Status RemoteSession::CheckVocab(const char* what, uint64_t got) const {
  const uint64_t vocab = static_cast<uint64_t>(coordinator_.model_config().vocab_size);
  if (got < vocab) return Status::Ok();
  return CorruptError("session " + std::to_string(id_) + ": the last stage sent " + what + " " +
                      std::to_string(got) + ", the model's vocabulary has " +
                      std::to_string(vocab) + " entries");
}

Status RemoteSession::Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) {
  LOCKSTEP_ASSIGN_OR_RETURN(Coordinator::StepReply reply, Send(tokens, std::nullopt));
  auto* got = std::get_if<wire::Logits>(&reply);
  if (got == nullptr) {
    return CorruptError("session " + std::to_string(id_) +
                        ": the last stage sent a step result where logits were asked for");
  }
  const uint32_t vocab = static_cast<uint32_t>(coordinator_.model_config().vocab_size);
  if (got->vocab != vocab) {
    return CorruptError("session " + std::to_string(id_) + ": the last stage sent " +
                        std::to_string(got->vocab) + " logits, the model has " +
                        std::to_string(vocab));
  }
  *logits = std::move(got->payload);
  return Status::Ok();
}

Result<StepOutcome> RemoteSession::FeedAndChoose(std::span<const uint32_t> tokens,
                                                 const StepContext& ctx) {
  if (coordinator_.ship_logits()) return StepBackend::FeedAndChoose(tokens, ctx);
  if (!SameSampling(ctx.sampling, sampling_)) {
    return InvalidError("session " + std::to_string(id_) +
                        ": a step asks for other sampling parameters than the session was "
                        "opened with (they are fixed at OpenSession)");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(
      Coordinator::StepReply reply,
      Send(tokens, wire::ChainHandoff{ctx.step, ctx.chain->Export()}));
  auto* got = std::get_if<wire::StepResult>(&reply);
  if (got == nullptr) {
    return CorruptError("session " + std::to_string(id_) +
                        ": the last stage sent logits where a step result was asked for "
                        "(a worker older than the chain handoff? --ship-logits works with it)");
  }
  LOCKSTEP_RETURN_IF_ERROR(CheckVocab("token", got->token));
  LOCKSTEP_ASSIGN_OR_RETURN(*ctx.chain, WitnessChain::Resume(got->chain_state));
  return StepOutcome{got->token, got->logits_sha256};
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
  auto forked = std::make_unique<RemoteSession>(coordinator_, child, length_, sampling_);
  forked->step_ = step_;
  return forked;
}

}  // namespace lockstep
