#include "runtime/run_receipt.h"

#include <utility>

namespace lockstep::runtime {

receipt::ReceiptInputs RunReceiptInputs(const DecodeResult& result, const DecodeRequest& request,
                                        const RunSite& site,
                                        std::optional<std::string> generated_text) {
  receipt::ReceiptInputs in;
  in.result = &result;
  in.seed = site.seed;
  in.generated_text = std::move(generated_text);
  in.window = request.window;
  in.evictions = request.evictions;
  in.sampling = request.sampling;
  in.plan = site.plan;
  in.workers = site.workers;
  return in;
}

}  // namespace lockstep::runtime
