// How a decode's result is shown: the human report (ending with the
// spec's CIS2_REF line, §12.1) or one JSON object (`--json`).
#pragma once

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "engine/decode.h"
#include "engine/witness.h"

namespace lockstep::cli {

struct RunReport {
  DecodeResult result;
  WitnessSeed seed;
  std::optional<std::string> generated_text;  // when a tokenizer is loaded
  std::string plan;                            // e.g. "monolithic" or "0:10,10:20"
  std::vector<std::string> notes;              // extra human-only lines
  // Set when a sharded run was compared with a monolithic one: every
  // digest equal (a difference is an error, so this is only ever true).
  bool compared_with_monolithic = false;
};

void PrintHuman(const RunReport& r, std::ostream& out);
void PrintJson(const RunReport& r, std::ostream& out);
// PrintJson when `json`, else PrintHuman.
void PrintReport(const RunReport& r, bool json, std::ostream& out);

}  // namespace lockstep::cli
