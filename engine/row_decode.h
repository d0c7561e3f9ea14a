// RowDecode: what a decode driven by multi-row steps (engine/row_step.h)
// keeps between its passes when its rows are given, not chosen (teacher
// forcing feeds the tokens a receipt claims; speculative decoding, whose
// rows follow its own choices, steps a DecodeSession instead): the result
// being built, the witness chain every chosen step folds into, and the
// StepContext that chooses with them.
// A pass's accepted steps are appended in step order (Append); Finish
// seals the chain (CIS2_REF) and the argmax digest, as RunDecode's result.
//
// REQUIRES: ValidateDecodeRequest(req) is Ok (the record copies what it
// needs). Not copyable (the context points into the record).
// Thread-compatible.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/decode.h"
#include "engine/row_step.h"
#include "engine/witness.h"

namespace lockstep {

class RowDecode {
 public:
  RowDecode(const DecodeRequest& req, const WitnessSeed& seed);
  RowDecode(const RowDecode&) = delete;
  RowDecode& operator=(const RowDecode&) = delete;

  // The context of a pass whose first chosen row is step `step`.
  const StepContext& Context(uint32_t step) {
    ctx_.step = step;
    return ctx_;
  }
  // Records a pass's accepted steps (tokens, logits sha256, traces moved).
  void Append(RowSteps& rows);
  // The tokens recorded so far.
  const std::vector<uint32_t>& generated() const { return out_.generated; }
  // The result: the chain finalised and the argmax digest. Spends the record.
  DecodeResult Finish();

 private:
  DecodeResult out_;
  WitnessChain chain_;
  SamplingScratch sampling_;
  std::vector<float> logits_;
  StepContext ctx_;
};

}  // namespace lockstep
