// RemoteSession (declared in coordinator.h): the StepBackend of a sharded run.
#include "coordinator/coordinator.h"

#include <bit>

#include "base/step_timeline.h"

namespace lockstep {
namespace {

bool SameSampling(const SamplingParams& a, const SamplingParams& b) {
  return std::bit_cast<uint32_t>(a.temperature) == std::bit_cast<uint32_t>(b.temperature) &&
         a.top_k == b.top_k && std::bit_cast<uint32_t>(a.top_p) == std::bit_cast<uint32_t>(b.top_p) &&
         a.seed == b.seed;
}

}  // namespace

RemoteSession::RemoteSession(Coordinator& coordinator, const wire::SessionOpen& open,
                             uint32_t cache_length, const SamplingParams& sampling, uint64_t epoch)
    : coordinator_(coordinator),
      open_(open),
      length_(cache_length),
      sampling_(sampling),
      epoch_(epoch) {}

RemoteSession::~RemoteSession() {
  coordinator_.Post(id(), wire::MarshalMessage(wire::Release{id()}), /*release=*/true);
}

Result<Coordinator::StepReply> RemoteSession::Send(std::span<const uint32_t> tokens,
                                                   std::optional<wire::ChainHandoff> handoff,
                                                   uint32_t relay) {
  if (tokens.empty()) return InvalidError("no tokens to feed");
  // Retried only when a recovery started meanwhile; each one uses up a
  // spare, so this runs at most spares + 1 times.
  for (;;) {
    const uint64_t seen = coordinator_.epoch();
    Status st = seen == epoch_ ? coordinator_.AwaitRecovery() : Rebuild(seen);
    if (st.ok()) {
      Result<Coordinator::StepReply> got = Exchange(tokens, length_, handoff, relay);
      if (got.ok()) {
        fed_.insert(fed_.end(), tokens.begin(), tokens.end());
        ops_.push_back(Op{false, static_cast<uint32_t>(tokens.size()), 0});
        length_ += static_cast<uint32_t>(tokens.size());
        return got;
      }
      st = got.status();
    }
    if (coordinator_.epoch() == seen) return st;
  }
}

Result<Coordinator::StepReply> RemoteSession::Exchange(std::span<const uint32_t> tokens,
                                                       uint32_t first_position,
                                                       std::optional<wire::ChainHandoff> handoff,
                                                       uint32_t relay) {
  wire::TokenInput in = NextInput(tokens, first_position);
  in.handoff = std::move(handoff);
  if (in.handoff) in.handoff->relay = relay;
  // The relayed steps take the request numbers after this one.
  step_ += relay;
  timeline::Mark(timeline::Event::kCoordinatorRequest, 0, id(), in.step);
  Coordinator::ReplyResult reply = coordinator_.Await(
      coordinator_.Request(id(), in.step, wire::MarshalMessage(in), relay), id(), in.step);
  timeline::Mark(timeline::Event::kCoordinatorResolved, 0, id(), in.step);
  return reply;
}

Result<wire::StepResult> RemoteSession::TakeRelayed() {
  // The relayed steps took the request numbers up to step_ - 1.
  const uint32_t step = step_ - relay_.left;
  Coordinator::ReplyResult reply =
      coordinator_.Await(coordinator_.Expect(id(), step), id(), step);
  timeline::Mark(timeline::Event::kCoordinatorResolved, 0, id(), step);
  auto* got = reply.ok() ? std::get_if<wire::StepResult>(&*reply) : nullptr;
  const Status st =
      !reply.ok()      ? reply.status()
      : got == nullptr ? CorruptError("session " + std::to_string(id()) +
                                      ": the last stage sent logits for a relayed step")
                       : CheckVocab("token", got->token);
  if (!st.ok()) {
    relay_ = {};
    return st;
  }
  relay_.left -= 1;
  relay_.token = got->token;
  relay_.decode_step += 1;
  return std::move(*got);
}

Status RemoteSession::EndRelay() {
  if (relay_.left == 0) return Status::Ok();
  uint32_t ran = 0;
  Status st;
  while (st.ok() && relay_.left > 0 && coordinator_.epoch() == epoch_) {
    Result<wire::StepResult> got = TakeRelayed();
    if (got.ok()) ++ran;
    st = got.status();
  }
  relay_ = {};
  // After a recovery the session is rebuilt from its history, which never
  // held these steps; otherwise their positions go, on every stage.
  if (coordinator_.epoch() != epoch_) return Status::Ok();
  LOCKSTEP_RETURN_IF_ERROR(st);
  if (ran > 0) {
    coordinator_.Post(id(), wire::MarshalMessage(wire::Evict{id(), length_, ran}), false);
  }
  return Status::Ok();
}

wire::TokenInput RemoteSession::NextInput(std::span<const uint32_t> tokens,
                                          uint32_t first_position) {
  wire::TokenInput in;
  in.phase = tokens.size() > 1 ? wire::TokenInput::Phase::kPrefill
                               : wire::TokenInput::Phase::kDecode;
  in.session_id = id();
  in.step = step_++;
  in.first_position = first_position;
  in.token_ids.assign(tokens.begin(), tokens.end());
  return in;
}

Status RemoteSession::FeedWithoutOutput(std::span<const uint32_t> tokens) {
  if (tokens.empty()) return InvalidError("no tokens to feed");
  LOCKSTEP_RETURN_IF_ERROR(EndRelay());
  for (;;) {  // rebuilt first after a recovery, as Send does
    const uint64_t seen = coordinator_.epoch();
    const Status st = seen == epoch_ ? coordinator_.AwaitRecovery() : Rebuild(seen);
    if (st.ok()) break;
    if (coordinator_.epoch() == seen) return st;
  }
  wire::TokenInput in = NextInput(tokens, length_);
  in.no_output = true;
  coordinator_.Post(id(), wire::MarshalMessage(in), false);
  fed_.insert(fed_.end(), tokens.begin(), tokens.end());  // a rebuild replays it awaited
  ops_.push_back(Op{false, static_cast<uint32_t>(tokens.size()), 0});
  length_ += static_cast<uint32_t>(tokens.size());
  return Status::Ok();
}

Status RemoteSession::Rebuild(uint64_t epoch) {
  relay_ = {};  // what was relayed went with the old id
  LOCKSTEP_RETURN_IF_ERROR(coordinator_.AwaitRecovery());
  // A fresh id: frames of the old one may still be in flight somewhere in
  // the pipeline, and their errors must not reach the rebuilt session.
  coordinator_.Post(id(), wire::MarshalMessage(wire::Release{id()}), /*release=*/true);
  open_.session_id = coordinator_.NewSessionId();
  coordinator_.Post(id(), wire::MarshalMessage(open_), false);
  uint32_t length = 0;
  size_t next = 0;
  for (const Op& op : ops_) {
    if (op.evict) {
      coordinator_.Post(id(), wire::MarshalMessage(wire::Evict{id(), op.a, op.b}), false);
      length -= op.b;
      continue;
    }
    const std::span<const uint32_t> tokens(fed_.data() + next, op.a);
    next += op.a;
    Result<Coordinator::StepReply> got = Exchange(tokens, length, std::nullopt);
    if (!got.ok()) return got.status().WithContext("rebuilding session " + std::to_string(id()));
    length += op.a;
  }
  epoch_ = epoch;
  return Status::Ok();
}

Status RemoteSession::CheckVocab(const char* what, uint64_t got) const {
  const uint64_t vocab = static_cast<uint64_t>(coordinator_.model_config().vocab_size);
  if (got < vocab) return Status::Ok();
  return CorruptError("session " + std::to_string(id()) + ": the last stage sent " + what + " " +
                      std::to_string(got) + ", the model's vocabulary has " +
                      std::to_string(vocab) + " entries");
}

Status RemoteSession::TakeTrace(std::vector<Digest> digests) {
  const size_t layers = static_cast<size_t>(coordinator_.model_config().num_layers);
  const size_t expected = open_.trace ? layers : 0;
  if (digests.size() != expected) {
    return CorruptError("session " + std::to_string(id()) + ": the last stage sent " +
                        std::to_string(digests.size()) + " layer digests, expected " +
                        std::to_string(expected));
  }
  trace_ = std::move(digests);
  return Status::Ok();
}

Status RemoteSession::Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) {
  LOCKSTEP_RETURN_IF_ERROR(EndRelay());
  LOCKSTEP_ASSIGN_OR_RETURN(Coordinator::StepReply reply, Send(tokens, std::nullopt));
  auto* got = std::get_if<wire::Logits>(&reply);
  if (got == nullptr) {
    return CorruptError("session " + std::to_string(id()) +
                        ": the last stage sent a step result where logits were asked for");
  }
  const uint32_t vocab = static_cast<uint32_t>(coordinator_.model_config().vocab_size);
  if (got->vocab != vocab) {
    return CorruptError("session " + std::to_string(id()) + ": the last stage sent " +
                        std::to_string(got->vocab) + " logits, the model has " +
                        std::to_string(vocab));
  }
  *logits = std::move(got->payload);
  return TakeTrace(std::move(got->layer_digests));
}

Result<StepOutcome> RemoteSession::FeedAndChoose(std::span<const uint32_t> tokens,
                                                 const StepContext& ctx) {
  if (coordinator_.ship_logits()) {
    ahead_ = 0;  // the coordinator chooses: nothing to relay
    return StepBackend::FeedAndChoose(tokens, ctx);
  }
  if (!SameSampling(ctx.sampling, sampling_)) {
    return InvalidError("session " + std::to_string(id()) +
                        ": a step asks for other sampling parameters than the session was "
                        "opened with (they are fixed at OpenSession)");
  }
  if (relay_.left > 0) {
    const bool continues =
        tokens.size() == 1 && tokens[0] == relay_.token && ctx.step == relay_.decode_step;
    if (continues && coordinator_.epoch() != epoch_) {
      ahead_ = relay_.left - 1;  // a recovery lost the relay: this step goes by request
      relay_ = {};
    } else if (continues) {
      const uint32_t rest = relay_.left - 1;
      Result<wire::StepResult> got = TakeRelayed();
      if (got.ok()) {
        fed_.push_back(tokens[0]);
        ops_.push_back(Op{false, 1, 0});
        length_ += 1;
        return Outcome(std::move(*got), ctx);
      }
      if (coordinator_.epoch() == epoch_) return got.status();
      ahead_ = rest;  // a recovery lost the relay: this step goes by request
    } else {
      LOCKSTEP_RETURN_IF_ERROR(EndRelay());
    }
  }
  const uint32_t relay = std::exchange(ahead_, 0);
  LOCKSTEP_ASSIGN_OR_RETURN(
      Coordinator::StepReply reply,
      Send(tokens, wire::ChainHandoff{ctx.step, ctx.chain->Export()}, relay));
  auto* got = std::get_if<wire::StepResult>(&reply);
  if (got == nullptr) {
    return CorruptError("session " + std::to_string(id()) +
                        ": the last stage sent logits where a step result was asked for "
                        "(a worker older than the chain handoff? --ship-logits works with it)");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(StepOutcome o, Outcome(std::move(*got), ctx));
  if (relay > 0) relay_ = Relay{relay, o.token, ctx.step + 1};
  return o;
}

Result<StepOutcome> RemoteSession::Outcome(wire::StepResult got, const StepContext& ctx) {
  LOCKSTEP_RETURN_IF_ERROR(CheckVocab("token", got.token));
  LOCKSTEP_RETURN_IF_ERROR(TakeTrace(std::move(got.layer_digests)));
  LOCKSTEP_ASSIGN_OR_RETURN(*ctx.chain, WitnessChain::Resume(got.chain_state));
  return StepOutcome{got.token, got.logits_sha256};
}

Status RemoteSession::Evict(uint32_t from, uint32_t count) {
  LOCKSTEP_RETURN_IF_ERROR(EndRelay());
  if (count == 0 || uint64_t{from} + count > length_) {
    return InvalidError("evict [" + std::to_string(from) + ", " +
                        std::to_string(uint64_t{from} + count) + ") of a cache of " +
                        std::to_string(length_) + " entries");
  }
  coordinator_.Post(id(), wire::MarshalMessage(wire::Evict{id(), from, count}), false);
  ops_.push_back(Op{true, from, count});
  length_ -= count;
  return Status::Ok();
}

Result<std::unique_ptr<RemoteSession>> RemoteSession::Fork() {
  LOCKSTEP_RETURN_IF_ERROR(EndRelay());
  LOCKSTEP_RETURN_IF_ERROR(coordinator_.health());
  const uint64_t child = coordinator_.NewSessionId();
  coordinator_.Post(child, wire::MarshalMessage(wire::Fork{child, id()}), false);
  wire::SessionOpen open = open_;
  open.session_id = child;
  auto forked = std::make_unique<RemoteSession>(coordinator_, open, length_, sampling_, epoch_);
  forked->step_ = step_;
  forked->fed_ = fed_;
  forked->ops_ = ops_;
  return forked;
}

}  // namespace lockstep
