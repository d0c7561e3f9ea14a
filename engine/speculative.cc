#include "engine/speculative.h"

#include <algorithm>
#include <vector>

namespace lockstep {

Speculator::Speculator(std::span<const uint32_t> prompt, const SpeculativeOptions& o,
                       std::unique_ptr<ProposalSource> source)
    : o_(o),
      source_(source ? std::move(source) : std::make_unique<LookupProposals>(o.max_ngram)),
      budget_(std::min<uint32_t>(2, o.max_proposals)),
      prompt_size_(prompt.size()),
      history_(prompt.begin(), prompt.end()) {}

Result<std::span<const uint32_t>> Speculator::Propose(std::span<const uint32_t> generated,
                                                      uint32_t room, std::span<const uint32_t> eos) {
  const size_t have = history_.size() - prompt_size_;  // chosen tokens only ever grow
  if (have < generated.size()) history_.insert(history_.end(), generated.begin() + have, generated.end());
  proposals_.clear();
  plain_ahead_ = 0;
  if (skip_ > 0) {  // backing off
    --skip_;
    if (backoff_begins_) plain_ahead_ = skip_;
    backoff_begins_ = false;
    return std::span<const uint32_t>(proposals_);
  }
  const uint32_t n = std::min(room, budget_);
  if (n == 0) return std::span<const uint32_t>(proposals_);
  LOCKSTEP_RETURN_IF_ERROR(source_->Propose(history_, n, &proposals_));
  if (proposals_.size() > n) proposals_.resize(n);
  // A row choosing an end-of-sequence id must be the last kept.
  const auto end = std::find_first_of(proposals_.begin(), proposals_.end(), eos.begin(), eos.end());
  proposals_.erase(end, proposals_.end());
  if (!proposals_.empty()) {
    dry_ = 0;
  } else if (++dry_ >= kDryLookups) {  // nothing to guess again: this step and 1, 2, 4 ... more run plain
    skip_ = std::min(uint32_t{1} << std::min<uint32_t>(dry_ - kDryLookups, 6), kMaxBackoff);
    plain_ahead_ = skip_;
  }
  return std::span<const uint32_t>(proposals_);
}

void Speculator::Observe(size_t proposed, std::span<const StepOutcome> chosen) {
  if (proposed == 0) return;
  const size_t kept = chosen.size() - 1;
  stats_.proposed += proposed;
  stats_.accepted += kept;
  stats_.passes += 1;
  if (kept == 0) {
    skip_ = backoff_;
    backoff_begins_ = true;
    backoff_ = std::min(2 * backoff_, kMaxBackoff);
    budget_ = 1;
    return;
  }
  backoff_ = 1;
  budget_ = kept == proposed ? std::min(2 * budget_, o_.max_proposals) : static_cast<uint32_t>(kept) + 1;
}

Status StepSpeculatively(DecodeSession& s, Speculator& speculator, size_t prompt_budget) {
  size_t budget = prompt_budget;
  const std::span<const uint32_t> tokens = s.NextTokens(&budget);
  if (tokens.empty() || !s.Chooses(tokens.size()) || s.stop_rule().text) {
    return s.Step(prompt_budget);  // a prompt chunk, or a step that only plain decoding takes
  }
  const StepContext& ctx = s.Context();
  const uint32_t room = SegmentEnd(s.request(), ctx.step) - ctx.step;  // rows past the first
  LOCKSTEP_ASSIGN_OR_RETURN(const std::span<const uint32_t> proposals,
                            speculator.Propose(s.generated(), room, s.stop_rule().eos));
  StepBackend& backend = s.backend();
  if (proposals.empty()) {  // plain; chained only through a backoff (the next may be multi-row)
    if (const uint32_t ahead = std::min(speculator.PlainStepsAhead(), room); ahead > 0) {
      backend.ExpectChainedSteps(ahead);
    }
    LOCKSTEP_ASSIGN_OR_RETURN(const StepOutcome one, backend.FeedAndChoose(tokens, ctx));
    speculator.Observe(0, std::span<const StepOutcome>(&one, 1));
    return s.Chose(tokens.size(), one);
  }
  std::vector<uint32_t> feed(tokens.begin(), tokens.end());
  feed.insert(feed.end(), proposals.begin(), proposals.end());
  const size_t proposed = proposals.size();
  RowSteps rows;
  LOCKSTEP_RETURN_IF_ERROR(backend.FeedRows(feed, static_cast<uint32_t>(proposed + 1), ctx, &rows));
  speculator.Observe(proposed, rows.steps);
  for (size_t i = 0; i < rows.steps.size() && !s.done(); ++i) {
    const std::vector<Digest>* trace = i < rows.traces.size() ? &rows.traces[i] : nullptr;
    LOCKSTEP_RETURN_IF_ERROR(s.Chose(i == 0 ? tokens.size() : 1, rows.steps[i], trace));
  }
  return Status::Ok();
}

Result<DecodeResult> RunSpeculativeDecode(StepBackend& backend, const DecodeRequest& req,
                                          const WitnessSeed& seed, const SpeculativeOptions& o,
                                          SpeculativeStats* stats,
                                          std::unique_ptr<ProposalSource> source) {
  LOCKSTEP_RETURN_IF_ERROR(ValidateDecodeRequest(req));
  DecodeSession s(backend, req, seed);
  Speculator speculator(req.prompt, o, std::move(source));
  while (!s.done()) LOCKSTEP_RETURN_IF_ERROR(StepSpeculatively(s, speculator));
  if (stats != nullptr) *stats = speculator.stats();
  return s.result();
}

}  // namespace lockstep
