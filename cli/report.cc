#include "cli/report.h"

#include <cstdio>
#include <fstream>
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
  if (!r.site.plan.empty()) out << "plan                  = " << r.site.plan << "\n";
  for (const std::string& n : r.notes) out << n << "\n";
  out << "weights_sha256        = " << ToHex(r.site.seed.weights_sha256) << "\n"
      << "config_sha256         = " << ToHex(r.site.seed.config_sha256) << "\n"
      << "tokenizer_sha256      = " << ToHex(r.site.seed.tokenizer_sha256) << "\n"
      << "prompt_token_ids      = " << IdList(d.prompt) << "\n"
      << "generated_token_ids   = " << IdList(d.generated) << "\n";
  if (r.generated_text) {
    out << "generated_text        = " << nlohmann::json(*r.generated_text).dump(-1, ' ', false,
                                          nlohmann::json::error_handler_t::replace) << "\n";
  }
  out << "table_digest          = " << ToHex(r.site.seed.table_digest) << "\n"
      << "inv_freq_table_digest = " << ToHex(r.site.seed.inv_freq_table_digest) << "\n"
      << "argmax_digest         = " << ToHex(d.argmax_digest) << "\n";
  // The verdict stands just above the spec's line, which always ends the report.
  if (r.compared_with_monolithic) out << "sharded == monolithic\n";
  out << "CIS2_REF digest=" << ToHex(d.cis2_ref) << " prompt_idx=0 prompt_toks=" << d.prompt.size()
      << " gen_toks=" << d.generated.size() << " dtype=fp32\n";
}

Result<nlohmann::json> MakeReceipt(const RunReport& r) {
  receipt::ReceiptInputs in =
      runtime::RunReceiptInputs(r.result, r.request, r.site, r.generated_text);
  in.compared_with_monolithic = r.compared_with_monolithic;
  in.timings = r.timings;
  in.speculative = r.speculative;
  nlohmann::json j = receipt::BuildReceipt(in);
  if (r.signer != nullptr) LOCKSTEP_RETURN_IF_ERROR(receipt::SignReceipt(&j, *r.signer));
  return j;
}

Status PrintJson(const RunReport& r, std::ostream& out) {
  LOCKSTEP_ASSIGN_OR_RETURN(nlohmann::json j, MakeReceipt(r));
  out << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  return Status::Ok();
}

Status WriteReceiptFile(const RunReport& r, const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(nlohmann::json j, MakeReceipt(r));
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return IoError(path + ": cannot create the receipt file");
    out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    if (!out) return IoError(path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return IoError(path + ": cannot write the receipt file");
  return Status::Ok();
}

Result<std::optional<keys::Identity>> LoadSignKey(const std::string& path) {
  if (path.empty()) return std::optional<keys::Identity>();
  LOCKSTEP_ASSIGN_OR_RETURN(keys::Identity id, keys::ReadIdentity(path));
  return std::optional<keys::Identity>(std::move(id));
}

Status PrintReport(const RunReport& r, bool json, std::ostream& out, const std::string& receipt_path) {
  if (json) {
    LOCKSTEP_RETURN_IF_ERROR(PrintJson(r, out));
  } else {
    PrintHuman(r, out);
  }
  if (!receipt_path.empty()) LOCKSTEP_RETURN_IF_ERROR(WriteReceiptFile(r, receipt_path));
  return Status::Ok();
}

}  // namespace lockstep::cli
