#include "engine/proposal_source.h"

#include "engine/proposer.h"

namespace lockstep {

Status LookupProposals::Propose(std::span<const uint32_t> history, size_t max_tokens,
                                std::vector<uint32_t>* out) {
  ProposeByLookup(history, max_tokens, max_ngram_, out);
  return Status::Ok();
}

}  // namespace lockstep
