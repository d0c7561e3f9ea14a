#include "engine/row_decode.h"

#include <utility>

namespace lockstep {

RowDecode::RowDecode(const DecodeRequest& req, const WitnessSeed& seed)
    : chain_(seed, req.prompt), ctx_{0, req.sampling, &chain_, &sampling_, &logits_} {
  out_.prompt = req.prompt;
}

void RowDecode::Append(RowSteps& rows) {
  for (const StepOutcome& o : rows.steps) {
    out_.generated.push_back(o.token);
    out_.logits_sha256.push_back(o.logits_sha256);
  }
  for (auto& t : rows.traces) out_.layer_digests.push_back(std::move(t));
}

DecodeResult RowDecode::Finish() {
  out_.cis2_ref = chain_.Finalize();
  out_.argmax_digest = ArgmaxDigest(out_.prompt, out_.generated);
  return std::move(out_);
}

}  // namespace lockstep
