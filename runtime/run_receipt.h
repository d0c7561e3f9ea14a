// The one assembly of a decode's receipt inputs (receipt/receipt.h), for
// every front end that emits a receipt: `run --json` / `--receipt`, the
// coordinator, and each answer `serve` gives. The options that change bits
// (window, evictions, sampling) are always the request's, and where it ran
// is one RunSite, so a served receipt is byte for byte `run --json`'s for
// the same request on the same model and cluster (timings aside, which
// only the caller adds). Plain data and a stateless function; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/decode.h"
#include "engine/witness.h"
#include "receipt/receipt.h"

namespace lockstep::runtime {

// Where a decode ran, as its receipt records it.
struct RunSite {
  WitnessSeed seed;                            // the model's artifacts and tables
  std::string plan;                            // "" monolithic, else e.g. "0:10,10:20"
  std::vector<receipt::WorkerEntry> workers;   // the stages (ReceiptWorkers), empty monolithic
};

// The receipt inputs of `result`, decoded from `request` at `site`, with
// `generated_text` (DecodeText of every generated id; nullopt without a
// tokenizer). `result` must outlive the returned value (it points to it).
receipt::ReceiptInputs RunReceiptInputs(const DecodeResult& result, const DecodeRequest& request,
                                        const RunSite& site,
                                        std::optional<std::string> generated_text);

}  // namespace lockstep::runtime
