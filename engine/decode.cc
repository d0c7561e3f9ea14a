#include "engine/decode.h"

#include "engine/decode_session.h"

#include "base/limits.h"

#include <algorithm>
#include <charconv>


namespace lockstep {
namespace {

bool ParseU32(std::string_view s, uint32_t* out) {
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

}  // namespace

Result<StepOutcome> StepBackend::FeedAndChoose(std::span<const uint32_t> tokens,
                                               const StepContext& ctx) {
  LOCKSTEP_RETURN_IF_ERROR(Feed(tokens, ctx.logits));
  return ChooseAndWitness(*ctx.logits, ctx.sampling, ctx.step, ctx.chain, ctx.scratch);
}

Result<EvictSpec> ParseEvictSpec(const std::string& text) {
  const size_t colon = text.find(':'), at = text.find('@');
  EvictSpec e;
  if (colon == std::string::npos || at == std::string::npos || at < colon ||
      !ParseU32(std::string_view(text).substr(0, colon), &e.from) ||
      !ParseU32(std::string_view(text).substr(colon + 1, at - colon - 1), &e.count) ||
      !ParseU32(std::string_view(text).substr(at + 1), &e.step)) {
    return InvalidError("--evict expects FROM:COUNT@STEP with non-negative integers, got '" +
                        text + "'");
  }
  if (e.count == 0) return InvalidError("--evict " + text + ": COUNT must be at least 1");
  return e;
}

Status ValidateDecodeRequest(const DecodeRequest& req) {
  if (req.prompt.empty()) return InvalidError("the prompt has no tokens");
  LOCKSTEP_RETURN_IF_ERROR(ValidateSamplingParams(req.sampling));
  if (req.window && *req.window < 0) {
    return InvalidError("--window " + std::to_string(*req.window) + ": must be >= 0");
  }
  for (const EvictSpec& e : req.evictions) {
    if (e.step >= req.gen) {
      return InvalidError("--evict at step " + std::to_string(e.step) +
                          " never happens: only " + std::to_string(req.gen) + " steps run");
    }
  }
  if (req.max_positions == 0 || req.gen == 0) return Status::Ok();
  // The cache as RunDecode grows it: the prompt, then one token fed after
  // each step but the last, evictions applied before that step's feed
  // (the backend refuses impossible evictions itself). Linear between
  // eviction steps, so this costs O(evictions), not O(gen).
  std::vector<EvictSpec> evictions = req.evictions;
  std::stable_sort(evictions.begin(), evictions.end(),
                   [](const EvictSpec& a, const EvictSpec& b) { return a.step < b.step; });
  uint64_t length = req.prompt.size(), peak = length, next = 0;  // next: first step not fed yet
  for (const EvictSpec& e : evictions) {
    if (e.step >= next) {
      length += e.step - next;  // steps [next, e.step) each fed one token
      peak = std::max(peak, length);
      next = e.step;
    }
    length -= std::min<uint64_t>(length, e.count);
    // The feed of step e.step happens after all of its evictions: counted
    // by the next segment.
  }
  length += (req.gen - 1) - std::min<uint64_t>(next, req.gen - 1);
  peak = std::max(peak, length);
  return CheckPositions(peak, req.max_positions, [&req] {
    return "a request of " + std::to_string(req.prompt.size()) + " prompt tokens and " +
           std::to_string(req.gen) + " to generate";
  });
}

Result<DecodeResult> RunDecode(StepBackend& backend, const DecodeRequest& req,
                               const WitnessSeed& seed) {
  LOCKSTEP_RETURN_IF_ERROR(ValidateDecodeRequest(req));
  DecodeSession session(backend, req, seed);
  while (!session.done()) LOCKSTEP_RETURN_IF_ERROR(session.Step());
  return session.result();
}

uint32_t SegmentEnd(const DecodeRequest& req, uint32_t step) {
  uint32_t end = req.gen - 1;
  for (const EvictSpec& e : req.evictions) {
    if (e.step >= step) end = std::min(end, e.step);
  }
  return end;
}

Status ApplyEvictionsAfter(StepBackend& backend, const DecodeRequest& req, uint32_t step) {
  for (const EvictSpec& e : req.evictions) {
    if (e.step != step) continue;
    Status st = backend.Evict(e.from, e.count);
    if (!st.ok()) {
      return st.WithContext("--evict " + std::to_string(e.from) + ":" + std::to_string(e.count) +
                            "@" + std::to_string(e.step));
    }
  }
  return Status::Ok();
}

}  // namespace lockstep
