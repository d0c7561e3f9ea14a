#include "engine/decode_session.h"

#include <algorithm>

namespace lockstep {

DecodeSession::DecodeSession(StepBackend& backend, const DecodeRequest& req,
                             const WitnessSeed& seed, StopRule stop, size_t cached)
    : backend_(backend),
      req_(req),
      stop_(std::move(stop)),
      chain_(seed, req_.prompt),
      ctx_{0, req_.sampling, &chain_, &sampling_, &logits_},
      fed_(cached) {
  generated_.reserve(req_.gen);
  logits_sha256_.reserve(req_.gen);
  if (req_.gen == 0) end_ = End::kLength;
}

std::span<const uint32_t> DecodeSession::NextTokens(size_t* prompt_budget) {
  if (done()) return {};
  if (!prefilling()) return last_;
  const size_t n = std::min(*prompt_budget, req_.prompt.size() - fed_);
  *prompt_budget -= n;
  return std::span<const uint32_t>(req_.prompt).subspan(fed_, n);
}

const StepContext& DecodeSession::Context() {
  ctx_.step = static_cast<uint32_t>(generated_.size());
  return ctx_;
}

void DecodeSession::Fed(size_t n) { fed_ = std::min(req_.prompt.size(), fed_ + n); }

Status DecodeSession::Chose(size_t n, const StepOutcome& o, const std::vector<Digest>* trace) {
  Fed(n);
  const uint32_t step = static_cast<uint32_t>(generated_.size());
  generated_.push_back(o.token);
  logits_sha256_.push_back(o.logits_sha256);
  if (trace != nullptr) {
    layer_digests_.push_back(*trace);
  } else if (const auto own = backend_.StepTrace(); !own.empty()) {
    layer_digests_.emplace_back(own.begin(), own.end());
  }
  last_[0] = o.token;
  if (Status st = ApplyEvictions(step); !st.ok()) {
    end_ = End::kStop;
    return st;
  }
  if (Stops(o.token)) {
    end_ = End::kStop;
  } else if (generated_.size() >= req_.gen) {
    end_ = End::kLength;
  }
  return Status::Ok();
}

Status DecodeSession::ApplyEvictions(uint32_t step) {
  if (std::any_of(req_.evictions.begin(), req_.evictions.end(),
                  [step](const EvictSpec& e) { return e.step == step; })) {
    promise_due_ = true;  // the chain of relayed steps breaks here
  }
  return ApplyEvictionsAfter(backend_, req_, step);
}

bool DecodeSession::Stops(uint32_t token) const {
  if (std::find(stop_.eos.begin(), stop_.eos.end(), token) != stop_.eos.end()) return true;
  return stop_.text && stop_.text(generated_);
}

Status DecodeSession::Step(size_t prompt_budget) {
  const std::span<const uint32_t> tokens = NextTokens(&prompt_budget);
  if (tokens.empty()) {
    return done() ? Status::Ok() : InvalidError("a decode step with no prompt budget");
  }
  if (!Chooses(tokens.size())) {
    LOCKSTEP_RETURN_IF_ERROR(backend_.Feed(tokens, &logits_));
    Fed(tokens.size());
    return Status::Ok();
  }
  const StepContext& ctx = Context();
  if (promise_due_) backend_.ExpectChainedSteps(SegmentEnd(req_, ctx.step) - ctx.step);
  promise_due_ = false;
  LOCKSTEP_ASSIGN_OR_RETURN(const StepOutcome o, backend_.FeedAndChoose(tokens, ctx));
  return Chose(tokens.size(), o);
}

DecodeResult DecodeSession::result() const {
  DecodeResult out;
  out.prompt = req_.prompt;
  out.generated = generated_;
  // The chain goes on (a running session's result is a snapshot): its
  // exported state resumed, never a junk one.
  Result<WitnessChain> chain = WitnessChain::Resume(chain_.Export());
  if (chain.ok()) out.cis2_ref = chain->Finalize();
  out.argmax_digest = ArgmaxDigest(out.prompt, out.generated);
  out.logits_sha256 = logits_sha256_;
  out.layer_digests = layer_digests_;
  return out;
}

}  // namespace lockstep
