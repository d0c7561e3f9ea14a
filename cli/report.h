// How a decode's result is shown: the human report (ending with the
// spec's CIS2_REF line, §12.1) or the receipt (receipt/receipt.h) as one
// JSON line (`--json`) and/or a file (`--receipt FILE`), signed when a
// signing identity is given.
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/decode.h"
#include "engine/witness.h"
#include "keys/identity.h"
#include "receipt/receipt.h"
#include "runtime/run_receipt.h"

namespace lockstep::cli {

struct RunReport {
  DecodeResult result;
  DecodeRequest request;  // its window, evictions and sampling are recorded
  runtime::RunSite site;  // seed, plan ("" monolithic) and the stages
  std::optional<std::string> generated_text;  // when a tokenizer is loaded
  std::vector<std::string> notes;              // extra human-only lines
  // Set when a sharded run was compared with a monolithic one: every
  // digest equal (a difference is an error, so this is only ever true).
  bool compared_with_monolithic = false;
  // Recorded in the receipt, never compared by verify.
  std::vector<std::pair<std::string, double>> timings;
  std::string speculative;  // options.speculative: the proposal source, "" plain (not in any digest)
  const keys::Identity* signer = nullptr;  // signs the receipt when set
};

// The receipt of `r`, signed when r.signer is set.
Result<nlohmann::json> MakeReceipt(const RunReport& r);
// Writes MakeReceipt(r) to `path` (pretty-printed JSON).
Status WriteReceiptFile(const RunReport& r, const std::string& path);
// Reads the signing identity of `--sign-key PATH` ("" -> nullopt).
Result<std::optional<keys::Identity>> LoadSignKey(const std::string& path);

void PrintHuman(const RunReport& r, std::ostream& out);
Status PrintJson(const RunReport& r, std::ostream& out);
// PrintJson when `json`, else PrintHuman; then the receipt file when
// `receipt_path` is non-empty.
Status PrintReport(const RunReport& r, bool json, std::ostream& out,
                   const std::string& receipt_path = "");

}  // namespace lockstep::cli
