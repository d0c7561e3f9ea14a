// RemoteSession::FeedAndChooseAll: one round of several sessions' steps.
#include "coordinator/remote_session.h"

#include <bit>
#include <optional>
#include <vector>

#include "base/step_timeline.h"

namespace lockstep {
namespace {

// A step sent in the round: its request number and its reply to come.
struct Sent {
  const RemoteSession::BatchedStep* step = nullptr;
  uint32_t request = 0;
  std::future<SessionLink::ReplyResult> reply;
};

}  // namespace

bool RemoteSession::CanJoinRound(const StepContext& ctx) {
  if (link_.ship_logits() || relay_.left > 0 || ahead_ > 0) return false;
  if (link_.epoch() != epoch_ || !link_.AwaitRecovery().ok()) return false;
  return std::bit_cast<uint32_t>(ctx.sampling.temperature) ==
             std::bit_cast<uint32_t>(sampling_.temperature) &&
         ctx.sampling.top_k == sampling_.top_k &&
         std::bit_cast<uint32_t>(ctx.sampling.top_p) == std::bit_cast<uint32_t>(sampling_.top_p) &&
         ctx.sampling.seed == sampling_.seed;
}

Result<StepOutcome> RemoteSession::FinishRound(std::span<const uint32_t> tokens,
                                               const StepContext& ctx,
                                               SessionLink::ReplyResult reply) {
  timeline::Mark(timeline::Event::kCoordinatorResolved, 0, id(), step_ - 1);
  if (!reply.ok()) {
    // A recovery meanwhile: the step goes again, alone, after a rebuild.
    if (link_.epoch() != epoch_) return FeedAndChoose(tokens, ctx);
    return reply.status();
  }
  auto* got = std::get_if<wire::StepResult>(&*reply);
  if (got == nullptr) {
    return CorruptError("session " + std::to_string(id()) +
                        ": the last stage sent logits where a step result was asked for");
  }
  history_.Fed(tokens);
  return Outcome(std::move(*got), ctx);
}

void RemoteSession::FeedAndChooseAll(std::span<const BatchedStep> steps) {
  std::vector<Sent> sent;
  std::vector<const BatchedStep*> alone;
  sent.reserve(steps.size());
  for (const BatchedStep& b : steps) {
    RemoteSession& s = *b.session;
    if (b.tokens.empty() || !s.CanJoinRound(*b.ctx)) {
      alone.push_back(&b);
      continue;
    }
    wire::TokenInput in = s.NextInput(b.tokens, s.history_.length());
    in.handoff = wire::ChainHandoff{b.ctx->step, b.ctx->chain->Export()};
    timeline::Mark(timeline::Event::kCoordinatorRequest, 0, s.id(), in.step);
    sent.push_back({&b, in.step,
                    s.link_.Request(s.id(), in.step, wire::MarshalMessage(in), 0)});
  }
  for (Sent& x : sent) {
    RemoteSession& s = *x.step->session;
    SessionLink::ReplyResult reply = s.link_.Await(std::move(x.reply), s.id(), x.request);
    Result<StepOutcome> o = s.FinishRound(x.step->tokens, *x.step->ctx, std::move(reply));
    *x.step->status = o.status();
    if (o.ok()) *x.step->out = *o;
  }
  for (const BatchedStep* b : alone) {
    Result<StepOutcome> o = b->session->FeedAndChoose(b->tokens, *b->ctx);
    *b->status = o.status();
    if (o.ok()) *b->out = *o;
  }
}

}  // namespace lockstep
