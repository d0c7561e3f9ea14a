#include "engine/speculative.h"

#include <algorithm>
#include <vector>

#include "engine/proposer.h"
#include "engine/row_decode.h"
#include "engine/row_step.h"

namespace lockstep {
namespace {

// How many tokens to propose: none for `skip` steps after a fully rejected
// pass (the skip doubling while rejections go on); otherwise a budget that
// doubles after a fully kept pass and shrinks to one past the kept run
// after a partly kept one, so rows that would be thrown away are not fed.
class ProposalPolicy {
 public:
  explicit ProposalPolicy(uint32_t max) : max_(max), budget_(std::min<uint32_t>(2, max)) {}
  uint32_t Next() {
    if (skip_ == 0) return budget_;
    --skip_;
    return 0;
  }
  void Observe(size_t proposed, size_t kept) {
    if (proposed == 0) return;
    if (kept == 0) {
      skip_ = backoff_;
      backoff_ = std::min(2 * backoff_, kMaxBackoff);
      budget_ = 1;
      return;
    }
    backoff_ = 1;
    budget_ = kept == proposed ? std::min(2 * budget_, max_) : static_cast<uint32_t>(kept) + 1;
  }

 private:
  uint32_t max_, budget_, skip_ = 0, backoff_ = 1;
};

}  // namespace

Result<DecodeResult> RunSpeculativeDecode(StepBackend& backend, const DecodeRequest& req,
                                          const WitnessSeed& seed, const SpeculativeOptions& o,
                                          SpeculativeStats* stats) {
  LOCKSTEP_RETURN_IF_ERROR(ValidateDecodeRequest(req));
  SpeculativeStats local;
  SpeculativeStats& st = stats != nullptr ? *stats : local;
  RowDecode decode(req, seed);
  std::vector<uint32_t> history = req.prompt, proposals, feed;
  RowSteps rows;
  ProposalPolicy policy(o.max_proposals);
  for (uint32_t step = 0; step < req.gen;) {
    const uint32_t room = SegmentEnd(req, step) - step;  // rows past the first
    proposals.clear();
    if (const uint32_t budget = std::min(room, policy.Next()); budget > 0) {
      ProposeByLookup(history, budget, o.max_ngram, &proposals);
    }
    if (step == 0) {
      feed = req.prompt;
    } else {
      feed.assign(1, history.back());
    }
    feed.insert(feed.end(), proposals.begin(), proposals.end());
    const StepContext& ctx = decode.Context(step);
    if (proposals.empty()) {
      LOCKSTEP_ASSIGN_OR_RETURN(const StepOutcome one, backend.FeedAndChoose(feed, ctx));
      rows.steps.assign(1, one);
      rows.traces.clear();
      if (const auto trace = backend.StepTrace(); !trace.empty()) rows.traces.emplace_back(trace.begin(), trace.end());
    } else {
      LOCKSTEP_RETURN_IF_ERROR(
          backend.FeedRows(feed, static_cast<uint32_t>(proposals.size() + 1), ctx, &rows));
      st.passes += 1;
    }
    const size_t kept = rows.steps.size() - 1;  // proposals kept
    st.proposed += proposals.size();
    st.accepted += kept;
    policy.Observe(proposals.size(), kept);
    for (const StepOutcome& s : rows.steps) history.push_back(s.token);
    decode.Append(rows);
    step += static_cast<uint32_t>(rows.steps.size());
    LOCKSTEP_RETURN_IF_ERROR(ApplyEvictionsAfter(backend, req, step - 1));
  }
  return decode.Finish();
}

}  // namespace lockstep
