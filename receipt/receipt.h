// Receipts (docs/receipts.md): the versioned JSON record of one decode that a
// third party can check later: what ran (artifact sha256s, table digests,
// the options that change bits, the plan and its workers), what came out
// (per step the chosen id and the sha256 of its logits, the §12 digests),
// optionally signed with Ed25519 over its canonical bytes. `lockstep run
// --json`, `--receipt FILE`, the coordinator and the server all emit the
// object BuildReceipt returns. ParseReceipt checks a receipt's shape and
// internal consistency before anything trusts it. Stateless functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/decode.h"
#include "engine/witness.h"
#include "keys/ed25519.h"
#include "keys/identity.h"

namespace lockstep::receipt {

inline constexpr int kReceiptVersion = 1;
inline constexpr const char* kSpecVersion = "CIS-2 v0.3b";

// One pipeline stage of a sharded run.
struct WorkerEntry {
  std::string endpoint;
  uint32_t first_layer = 0;
  uint32_t end_layer = 0;       // exclusive
  std::string curve_public_z85;  // "" when the link is not authenticated
};

// Everything a receipt records. `plan` is "" for a monolithic run.
struct ReceiptInputs {
  const DecodeResult* result = nullptr;  // REQUIRES: non-null
  WitnessSeed seed;
  std::optional<std::string> generated_text;
  std::optional<int> window;           // --window (absent: none)
  std::vector<EvictSpec> evictions;    // --evict, in order
  SamplingParams sampling;             // greedy unless temperature > 0 (docs/sampling.md)
  std::string plan;
  std::vector<WorkerEntry> workers;
  bool compared_with_monolithic = false;
  // Decoded speculatively (`run --speculative`): options.speculative names
  // the proposal source ("prompt-lookup", or "draft-model" for
  // --draft-model); "" for a plain decode. Excluded from every digest and
  // never compared by verify: the steps, chain and argmax digest are plain
  // decoding's.
  std::string speculative;
  // Non-normative (kept under "timings", never compared by verify).
  std::vector<std::pair<std::string, double>> timings;
};

// The receipt object (unsigned).
nlohmann::json BuildReceipt(const ReceiptInputs& in);

// `text` as a receipt stores it in generated_text: invalid UTF-8 replaced
// by U+FFFD, so that it re-serialises to the same canonical bytes.
std::string StoredText(const std::string& text);

// The bytes a signature covers: the receipt without its "signature" member,
// keys sorted, no whitespace, non-ASCII escaped (docs/receipts.md).
std::string CanonicalBytes(const nlohmann::json& receipt);

// Adds "signature": {"algorithm": "ed25519", "public_key", "value"}.
Status SignReceipt(nlohmann::json* receipt, const keys::Identity& signer);

// Checks the signature against the key it names, and, when `trusted` is
// given, that this key is the trusted one. Mismatch says which: "not
// signed", "signed by another key ...", "signature does not verify".
Status CheckSignature(const nlohmann::json& receipt,
                      const std::optional<keys::Ed25519Public>& trusted);

// A receipt's fields, checked for shape and internal consistency.
struct ParsedReceipt {
  int version = 0;
  WitnessSeed seed;
  std::vector<uint32_t> prompt;
  std::vector<uint32_t> generated;
  std::vector<Digest> logits_sha256;  // per step
  Digest argmax_digest{};
  Digest cis2_ref{};
  uint32_t gen = 0;
  std::optional<int> window;
  std::vector<EvictSpec> evictions;
  SamplingParams sampling;
  std::string plan;
  std::vector<WorkerEntry> workers;
  std::optional<std::string> generated_text;  // display only; verify recomputes it
  std::vector<std::vector<Digest>> trace;  // [step][layer] (receipt/trace.h); empty: untraced
  bool signed_ = false;
};
// Invalid naming the member on any missing/malformed field, an unknown
// version, or steps inconsistent with generated_token_ids / options.gen.
Result<ParsedReceipt> ParseReceipt(const nlohmann::json& receipt);

// Reads and parses a receipt file: a JSON object, or the output of `lockstep
// run --json` (its last line). Errors name the path.
Result<nlohmann::json> ReadReceiptFile(const std::string& path);

// Where a recomputed decode first departs from a receipt.
struct Divergence {
  std::string what;  // human text: "step 3: logits_sha256 receipt … recomputed …; token …"
};
// nullopt when prompt, every step's logits sha256 and token, argmax_digest
// and cis2_ref all agree; else the first difference, with both values. A
// traced receipt is compared layer by layer before each step's logits: the
// first differing (step, layer) is named with the worker that computed it.
std::optional<Divergence> FirstDivergence(const ParsedReceipt& receipt,
                                          const DecodeResult& recomputed);
// The receipt's generated_text against `text`, the recomputed tokens
// decoded by the model's tokenizer: nullopt when they agree (or when the
// receipt has no text), else both values.
std::optional<Divergence> TextDivergence(const ParsedReceipt& receipt, const std::string& text);

}  // namespace lockstep::receipt
