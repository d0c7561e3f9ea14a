#include "runtime/compare.h"

#include <string>

namespace lockstep::runtime {

Status CompareResults(const DecodeResult& a, const DecodeResult& b, std::string_view a_name,
                      std::string_view b_name) {
  std::string diff;
  if (a.prompt != b.prompt) diff += " prompt_token_ids";
  if (a.generated != b.generated) diff += " generated_token_ids";
  if (a.argmax_digest != b.argmax_digest) diff += " argmax_digest";
  if (a.logits_sha256 != b.logits_sha256) diff += " per-step logits_sha256";
  if (a.layer_digests != b.layer_digests) diff += " per-layer trace digests";
  if (a.cis2_ref != b.cis2_ref) {
    diff += " cis2_ref (" + std::string(a_name) + " " + ToHex(a.cis2_ref) + ", " +
            std::string(b_name) + " " + ToHex(b.cis2_ref) + ")";
  }
  if (diff.empty()) return Status::Ok();
  return MismatchError(std::string(a_name) + " != " + std::string(b_name) + ":" + diff);
}

}  // namespace lockstep::runtime
