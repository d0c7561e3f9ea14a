#include "cli/verify_command.h"

#include <iostream>

#include "cli/exit_status.h"
#include "keys/identity.h"
#include "receipt/receipt.h"
#include "runtime/generated_text.h"
#include "runtime/recompute.h"

namespace lockstep::cli {
namespace {

using nlohmann::json;

Result<keys::Ed25519Public> TrustedKey(const std::string& trust) {
  if (trust.size() == 64 && trust.find('/') == std::string::npos) {
    if (auto hex = keys::ParseSignPublicHex(trust); hex.ok()) return *hex;
  }
  LOCKSTEP_ASSIGN_OR_RETURN(keys::PublicIdentity pub, keys::ReadPublicIdentity(trust));
  return pub.sign_public;
}

// generated_text is recomputed from the tokens when the model folder has a
// tokenizer; the receipt's other claims about how it ran cannot be
// recomputed, and only a trusted signature vouches for them.
Status CheckClaims(const VerifyOptions& o, const receipt::ParsedReceipt& r,
                   const DecodeResult& again, bool trusted) {
  if (r.generated_text) {
    std::optional<std::string> text;
    if (!o.model_dir.empty()) {
      if (Result<ModelFiles> files = LocateModelFiles(o.model_dir); files.ok()) {
        text = runtime::DecodeText(*files, again.generated);
      }
    }
    if (!text) {
      std::cout << "generated_text        = not checked (no tokenizer.json in --model)\n";
    } else if (auto d = receipt::TextDivergence(r, *text)) {
      return MismatchError(d->what);
    } else {
      std::cout << "generated_text        = the text of the recomputed tokens\n";
    }
  }
  if (!r.plan.empty() || !r.workers.empty()) {
    std::cout << "plan, workers         = "
              << (trusted ? "as the trusted signer states them (not recomputed)"
                          : "NOT VERIFIED: without --trust anyone could have written them")
              << "\n";
  }
  return Status::Ok();
}

// Ok = verified; Mismatch = a difference (message says which); other = error.
Status Verify(const VerifyOptions& o) {
  LOCKSTEP_ASSIGN_OR_RETURN(json j, receipt::ReadReceiptFile(o.receipt_path));
  if (!o.trust.empty()) {
    LOCKSTEP_ASSIGN_OR_RETURN(keys::Ed25519Public trusted, TrustedKey(o.trust));
    LOCKSTEP_RETURN_IF_ERROR(receipt::CheckSignature(j, trusted));
    std::cout << "signature             = valid, by the trusted key\n";
  } else if (j.contains("signature")) {
    LOCKSTEP_RETURN_IF_ERROR(receipt::CheckSignature(j, std::nullopt));
    std::cout << "signature             = valid, by " << j["signature"].value("public_key", "")
              << " (not checked against a trusted key: pass --trust)\n";
  } else {
    std::cout << "signature             = none\n";
  }
  LOCKSTEP_ASSIGN_OR_RETURN(receipt::ParsedReceipt r, receipt::ParseReceipt(j));
  ModelPins pins;
  pins.weights = r.seed.weights_sha256;
  pins.tokenizer = r.seed.tokenizer_sha256;
  pins.config = r.seed.config_sha256;
  pins.name = o.receipt_path;
  const runtime::RecomputeOptions how{o.model_dir, o.workers, o.config, o.ship_logits, o.compute};
  LOCKSTEP_ASSIGN_OR_RETURN(runtime::Recomputed re, runtime::RecomputeReceipt(r, pins, how));
  const std::string& where = re.where;
  const DecodeResult& again = re.result;
  std::cout << "artifacts             = match the receipt\n"
            << "recomputed            = " << where << ", " << again.generated.size()
            << " steps by teacher forcing\n";
  if (re.decode_s > 0) {  // a measurement, not part of the verdict
    std::cout << "recompute_s           = " << re.decode_s << " (weights loaded)\n";
  }
  if (!r.trace.empty()) {
    std::cout << "trace                 = " << r.trace[0].size()
              << " layer digests per step, compared\n";
  }
  if (auto d = receipt::FirstDivergence(r, again)) return MismatchError(d->what);
  return CheckClaims(o, r, again, !o.trust.empty());
}

}  // namespace

CLI::App* AddVerifyCommand(CLI::App& app, VerifyOptions& o) {
  CLI::App* c = app.add_subcommand("verify", "Check a receipt: signature, artifacts, recomputation");
  c->add_option("receipt", o.receipt_path, "Receipt file (run/coordinator --receipt, or --json output)")
      ->required();
  c->add_option("--model", o.model_dir, "Model folder to recompute with");
  auto* workers = c->add_option("--workers", o.workers, "Recompute on K loopback worker processes");
  auto* config = c->add_option("--config", o.config, "Recompute on the cluster of this config");
  workers->excludes(config);
  c->add_flag("--ship-logits", o.ship_logits, "Send every step's logits to the coordinator, which chooses the token (same digests)");
  c->add_option("--trust", o.trust, "Require a signature by this key (.pub file or 64 hex)");
  c->add_option("--isa", o.compute.isa, "Kernels: scalar|avx2|avx512|neon|auto (every worker's too)")
      ->default_val("auto");
  c->add_option("--threads", o.compute.threads,
                "Compute threads, including the caller (every worker's too)")
      ->default_val(1)
      ->check(CLI::Range(1, 256));
  return c;
}

int RunVerifyCommand(const VerifyOptions& o) {
  Status st;
  if (o.model_dir.empty() && o.config.empty()) {
    st = InvalidError("give --model DIR (or --config C.json)");
  } else if (o.workers < 0) {
    st = InvalidError("--workers must be at least 1");
  } else {
    st = Verify(o);
  }
  if (st.ok()) std::cout << "VERIFIED\n";
  if (st.kind() != ErrorKind::kMismatch) return ExitStatus("verify", st);
  std::cout << "DIFFERS: " << st.message() << "\n";
  return 1;
}

}  // namespace lockstep::cli
