// The one comparison of two decode results: tokens, the argmax digest,
// every step's logits sha256 and the CIS2_REF digest (§12.1), by bits.
// Sharded vs monolithic (`--compare-monolithic`), the §12.4 double run
// (runtime/checked_decode.h) and tests all use it.
#pragma once

#include <string_view>

#include "base/status.h"
#include "engine/decode.h"

namespace lockstep::runtime {

// Ok when every token and digest of `a` equals `b`'s; else Mismatch
// "A != B: <what differs>" with a_name/b_name for A/B.
Status CompareResults(const DecodeResult& a, const DecodeResult& b, std::string_view a_name,
                      std::string_view b_name);

}  // namespace lockstep::runtime
