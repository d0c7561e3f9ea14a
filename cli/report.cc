#include "cli/report.h"

#include <nlohmann/json.hpp>

namespace lockstep::cli {
namespace {

std::string IdList(const std::vector<uint32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

}  // namespace

void PrintHuman(const RunReport& r, std::ostream& out) {
  const DecodeResult& d = r.result;
  if (!r.plan.empty()) out << "plan                  = " << r.plan << "\n";
  for (const std::string& n : r.notes) out << n << "\n";
  out << "weights_sha256        = " << ToHex(r.seed.weights_sha256) << "\n"
      << "config_sha256         = " << ToHex(r.seed.config_sha256) << "\n"
      << "tokenizer_sha256      = " << ToHex(r.seed.tokenizer_sha256) << "\n"
      << "prompt_token_ids      = " << IdList(d.prompt) << "\n"
      << "generated_token_ids   = " << IdList(d.generated) << "\n";
  if (r.generated_text) {
    out << "generated_text        = " << nlohmann::json(*r.generated_text).dump(-1, ' ', false,
                                          nlohmann::json::error_handler_t::replace) << "\n";
  }
  out << "table_digest          = " << ToHex(r.seed.table_digest) << "\n"
      << "inv_freq_table_digest = " << ToHex(r.seed.inv_freq_table_digest) << "\n"
      << "argmax_digest         = " << ToHex(d.argmax_digest) << "\n";
  // The verdict stands just above the spec's line, which always ends the report.
  if (r.compared_with_monolithic) out << "sharded == monolithic\n";
  out << "CIS2_REF digest=" << ToHex(d.cis2_ref) << " prompt_idx=0 prompt_toks=" << d.prompt.size()
      << " gen_toks=" << d.generated.size() << " dtype=fp32\n";
}

void PrintJson(const RunReport& r, std::ostream& out) {
  const DecodeResult& d = r.result;
  nlohmann::json j;
  j["prompt_token_ids"] = d.prompt;
  j["generated_token_ids"] = d.generated;
  j["table_digest"] = ToHex(r.seed.table_digest);
  j["inv_freq_table_digest"] = ToHex(r.seed.inv_freq_table_digest);
  j["argmax_digest"] = ToHex(d.argmax_digest);
  j["cis2_ref"] = ToHex(d.cis2_ref);
  j["weights_sha256"] = ToHex(r.seed.weights_sha256);
  j["tokenizer_sha256"] = ToHex(r.seed.tokenizer_sha256);
  j["config_sha256"] = ToHex(r.seed.config_sha256);
  if (r.generated_text) j["generated_text"] = *r.generated_text;
  if (!r.plan.empty()) j["plan"] = r.plan;
  if (r.compared_with_monolithic) j["sharded_equals_monolithic"] = true;
  out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void PrintReport(const RunReport& r, bool json, std::ostream& out) {
  if (json) {
    PrintJson(r, out);
  } else {
    PrintHuman(r, out);
  }
}

}  // namespace lockstep::cli
