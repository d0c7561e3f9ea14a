#include "coordinator/remote_session.h"

#include <bit>
#include <utility>

#include "base/step_timeline.h"

namespace lockstep {
namespace {

bool SameSampling(const SamplingParams& a, const SamplingParams& b) {
  return std::bit_cast<uint32_t>(a.temperature) == std::bit_cast<uint32_t>(b.temperature) &&
         a.top_k == b.top_k && std::bit_cast<uint32_t>(a.top_p) == std::bit_cast<uint32_t>(b.top_p) &&
         a.seed == b.seed;
}

}  // namespace

RemoteSession::RemoteSession(SessionLink& link, const wire::SessionOpen& open,
                             const SamplingParams& sampling, uint64_t epoch)
    : link_(link), open_(open), sampling_(sampling), epoch_(epoch) {}

RemoteSession::~RemoteSession() {
  link_.Post(id(), wire::MarshalMessage(wire::Release{id()}), /*release=*/true);
}

Result<SessionLink::StepReply> RemoteSession::Send(std::span<const uint32_t> tokens,
                                                   std::optional<wire::ChainHandoff> handoff,
                                                   uint32_t relay, uint16_t step_rows) {
  if (tokens.empty()) return InvalidError("no tokens to feed");
  // Retried only when a recovery started meanwhile; each one uses up a
  // spare, so this runs at most spares + 1 times.
  for (;;) {
    LOCKSTEP_RETURN_IF_ERROR(Current());
    Result<StepReply> got = Exchange(tokens, history_.length(), handoff, relay, step_rows);
    if (got.ok()) {
      history_.Fed(tokens);
      return got;
    }
    if (link_.epoch() == epoch_) return got.status();
  }
}

Status RemoteSession::Current() {
  for (;;) {
    const uint64_t seen = link_.epoch();
    const Status st = seen == epoch_ ? link_.AwaitRecovery() : Rebuild(seen);
    if (st.ok() || link_.epoch() == seen) return st;
  }
}

Result<SessionLink::StepReply> RemoteSession::Exchange(std::span<const uint32_t> tokens,
                                                       uint32_t first_position,
                                                       std::optional<wire::ChainHandoff> handoff,
                                                       uint32_t relay, uint16_t step_rows) {
  wire::TokenInput in = NextInput(tokens, first_position);
  in.handoff = std::move(handoff);
  if (in.handoff) in.handoff->relay = relay;
  in.step_rows = step_rows;
  // The relayed steps take the request numbers after this one.
  step_ += relay;
  timeline::Mark(timeline::Event::kCoordinatorRequest, 0, id(), in.step);
  SessionLink::ReplyResult reply = link_.Await(
      link_.Request(id(), in.step, wire::MarshalMessage(in), relay), id(), in.step);
  timeline::Mark(timeline::Event::kCoordinatorResolved, 0, id(), in.step);
  return reply;
}

Result<wire::StepResult> RemoteSession::TakeRelayed() {
  // The relayed steps took the request numbers up to step_ - 1.
  const uint32_t step = step_ - relay_.left;
  SessionLink::ReplyResult reply =
      link_.Await(link_.Expect(id(), step), id(), step);
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
  while (st.ok() && relay_.left > 0 && link_.epoch() == epoch_) {
    Result<wire::StepResult> got = TakeRelayed();
    if (got.ok()) ++ran;
    st = got.status();
  }
  relay_ = {};
  // After a recovery the session is rebuilt from its history, which never
  // held these steps; otherwise their positions go, on every stage.
  if (link_.epoch() != epoch_) return Status::Ok();
  LOCKSTEP_RETURN_IF_ERROR(st);
  if (ran > 0) {
    link_.Post(id(), wire::MarshalMessage(wire::Evict{id(), history_.length(), ran}), false);
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
  LOCKSTEP_RETURN_IF_ERROR(Current());  // rebuilt first after a recovery, as Send does
  wire::TokenInput in = NextInput(tokens, history_.length());
  in.no_output = true;
  link_.Post(id(), wire::MarshalMessage(in), false);
  history_.Fed(tokens);  // a rebuild replays it awaited
  return Status::Ok();
}

Status RemoteSession::Rebuild(uint64_t epoch) {
  relay_ = {};  // what was relayed went with the old id
  LOCKSTEP_RETURN_IF_ERROR(link_.AwaitRecovery());
  // A fresh id: frames of the old one may still be in flight somewhere in
  // the pipeline, and their errors must not reach the rebuilt session.
  link_.Post(id(), wire::MarshalMessage(wire::Release{id()}), /*release=*/true);
  open_.session_id = link_.NewSessionId();
  link_.Post(id(), wire::MarshalMessage(open_), false);
  LOCKSTEP_RETURN_IF_ERROR(history_.Replay(
      [&](std::span<const uint32_t> tokens, uint32_t first_position) {
        return Exchange(tokens, first_position, std::nullopt)
            .status()
            .WithContext("rebuilding session " + std::to_string(id()));
      },
      [&](uint32_t from, uint32_t count) {
        link_.Post(id(), wire::MarshalMessage(wire::Evict{id(), from, count}), false);
      }));
  epoch_ = epoch;
  return Status::Ok();
}

Status RemoteSession::CheckVocab(const char* what, uint64_t got) const {
  const uint64_t vocab = static_cast<uint64_t>(link_.model_config().vocab_size);
  if (got < vocab) return Status::Ok();
  return CorruptError("session " + std::to_string(id()) + ": the last stage sent " + what + " " +
                      std::to_string(got) + ", the model's vocabulary has " +
                      std::to_string(vocab) + " entries");
}

Status RemoteSession::TakeTrace(std::vector<Digest> digests) {
  const size_t layers = static_cast<size_t>(link_.model_config().num_layers);
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
  LOCKSTEP_ASSIGN_OR_RETURN(StepReply reply, Send(tokens, std::nullopt));
  auto* got = std::get_if<wire::Logits>(&reply);
  if (got == nullptr) {
    return CorruptError("session " + std::to_string(id()) +
                        ": the last stage sent a step result where logits were asked for");
  }
  const uint32_t vocab = static_cast<uint32_t>(link_.model_config().vocab_size);
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
  if (link_.ship_logits()) {
    ahead_ = 0;  // the session chooses: nothing to relay
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
    if (continues && link_.epoch() != epoch_) {
      ahead_ = relay_.left - 1;  // a recovery lost the relay: this step goes by request
      relay_ = {};
    } else if (continues) {
      const uint32_t rest = relay_.left - 1;
      Result<wire::StepResult> got = TakeRelayed();
      if (got.ok()) {
        history_.Fed(tokens);
        return Outcome(std::move(*got), ctx);
      }
      if (link_.epoch() == epoch_) return got.status();
      ahead_ = rest;  // a recovery lost the relay: this step goes by request
    } else {
      LOCKSTEP_RETURN_IF_ERROR(EndRelay());
    }
  }
  const uint32_t relay = std::exchange(ahead_, 0);
  LOCKSTEP_ASSIGN_OR_RETURN(
      StepReply reply,
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
  if (!got.later_rows.empty()) {
    return CorruptError("session " + std::to_string(id()) + ": the last stage sent " +
                        std::to_string(got.later_rows.size() + 1) +
                        " step rows for an ordinary step");
  }
  LOCKSTEP_RETURN_IF_ERROR(CheckVocab("token", got.token));
  LOCKSTEP_RETURN_IF_ERROR(TakeTrace(std::move(got.layer_digests)));
  LOCKSTEP_ASSIGN_OR_RETURN(*ctx.chain, WitnessChain::Resume(got.chain_state));
  return StepOutcome{got.token, got.logits_sha256};
}

Status RemoteSession::Evict(uint32_t from, uint32_t count) {
  LOCKSTEP_RETURN_IF_ERROR(EndRelay());
  if (count == 0 || uint64_t{from} + count > history_.length()) {
    return InvalidError("evict [" + std::to_string(from) + ", " +
                        std::to_string(uint64_t{from} + count) + ") of a cache of " +
                        std::to_string(history_.length()) + " entries");
  }
  link_.Post(id(), wire::MarshalMessage(wire::Evict{id(), from, count}), false);
  history_.Evicted(from, count);
  return Status::Ok();
}

Result<std::unique_ptr<RemoteSession>> RemoteSession::Fork(uint32_t reserve_positions) {
  LOCKSTEP_RETURN_IF_ERROR(EndRelay());
  LOCKSTEP_RETURN_IF_ERROR(link_.health());
  const uint64_t child = link_.NewSessionId();
  link_.Post(child, wire::MarshalMessage(wire::Fork{child, id(), reserve_positions}), false);
  wire::SessionOpen open = open_;
  open.session_id = child;
  open.reserve_positions = reserve_positions;  // what a rebuild reserves
  auto forked = std::make_unique<RemoteSession>(link_, open, sampling_, epoch_);
  forked->step_ = step_;
  forked->history_ = history_;
  return forked;
}

}  // namespace lockstep
