#include "engine/teacher_forcing.h"

#include <string>
#include <vector>

#include "engine/row_decode.h"
#include "engine/row_step.h"

namespace lockstep {

Result<DecodeResult> TeacherForce(StepBackend& backend, const DecodeRequest& req,
                                  std::span<const uint32_t> claimed, uint32_t vocab,
                                  const WitnessSeed& seed) {
  LOCKSTEP_RETURN_IF_ERROR(ValidateDecodeRequest(req));
  if (claimed.size() != req.gen) {
    return InvalidError("teacher forcing needs " + std::to_string(req.gen) + " claimed tokens, got " +
                        std::to_string(claimed.size()));
  }
  RowDecode decode(req, seed);
  std::vector<uint32_t> feed;
  RowSteps rows;
  for (uint32_t step = 0; step < req.gen;) {
    uint32_t end = SegmentEnd(req, step);
    for (uint32_t s = step; s < end; ++s) {
      if (claimed[s] >= vocab) end = s;  // fed after step s: never
    }
    if (step == 0) {
      feed = req.prompt;
    } else {
      feed.assign(1, claimed[step - 1]);
    }
    feed.insert(feed.end(), claimed.begin() + step, claimed.begin() + end);
    backend.ExpectChainedSteps(end - step);
    LOCKSTEP_RETURN_IF_ERROR(backend.FeedRows(feed, end - step + 1, decode.Context(step), &rows));
    decode.Append(rows);
    step += static_cast<uint32_t>(rows.steps.size());
    if (decode.generated().back() != claimed[step - 1]) break;  // the first difference
    LOCKSTEP_RETURN_IF_ERROR(ApplyEvictionsAfter(backend, req, step - 1));
  }
  return decode.Finish();
}

}  // namespace lockstep
