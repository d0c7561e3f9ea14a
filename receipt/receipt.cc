#include "receipt/receipt.h"


#include <limits>

#include "base/json.h"
#include "base/read_only_file.h"
#include "receipt/trace.h"

namespace lockstep::receipt {
namespace {

using nlohmann::json;

constexpr uint64_t kMaxReceiptBytes = 64ull << 20;

std::string EvictText(const EvictSpec& e) {
  return std::to_string(e.from) + ":" + std::to_string(e.count) + "@" + std::to_string(e.step);
}

std::string Hex(const uint8_t* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

// ---- typed member access with errors naming the member ----------------------

Result<const json*> Member(const json& obj, const std::string& key, const std::string& where) {
  if (!obj.is_object()) return InvalidError(where + ": is not a JSON object");
  auto it = obj.find(key);
  if (it == obj.end()) return InvalidError(where + ": missing \"" + key + "\"");
  return &*it;
}

Result<Digest> DigestMember(const json& obj, const std::string& key, const std::string& where) {
  LOCKSTEP_ASSIGN_OR_RETURN(const json* v, Member(obj, key, where));
  if (!v->is_string()) return InvalidError(where + "." + key + ": expected a hex string");
  Result<Digest> d = DigestFromHex(v->get<std::string>());
  if (!d.ok()) return InvalidError(where + "." + key + ": expected 64 hex characters");
  return d;
}

Result<uint32_t> U32(const json& v, const std::string& where) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
      v.get<uint64_t>() > std::numeric_limits<uint32_t>::max()) {
    return InvalidError(where + ": expected an integer in [0, 2^32)");
  }
  return static_cast<uint32_t>(v.get<uint64_t>());
}

Result<std::vector<uint32_t>> IdsMember(const json& obj, const std::string& key,
                                        const std::string& where) {
  LOCKSTEP_ASSIGN_OR_RETURN(const json* v, Member(obj, key, where));
  if (!v->is_array()) return InvalidError(where + "." + key + ": expected an array of ids");
  std::vector<uint32_t> ids;
  ids.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    LOCKSTEP_ASSIGN_OR_RETURN(uint32_t id, U32((*v)[i], where + "." + key + "[" + std::to_string(i) + "]"));
    ids.push_back(id);
  }
  return ids;
}

std::string Short(const Digest& d) { return ToHex(d); }

}  // namespace

std::string StoredText(const std::string& text) {
  // Through JSON, so the stored text re-serialises identically.
  const std::string quoted = json(text).dump(-1, ' ', true, json::error_handler_t::replace);
  Result<json> back = ParseJsonStrict(quoted, "generated_text", ErrorKind::kInternal);
  return back.ok() && back->is_string() ? back->get<std::string>() : std::string();
}

json BuildReceipt(const ReceiptInputs& in) {
  const DecodeResult& d = *in.result;
  json j;
  j["receipt_version"] = kReceiptVersion;
  j["spec"] = kSpecVersion;
  j["weights_sha256"] = ToHex(in.seed.weights_sha256);
  j["config_sha256"] = ToHex(in.seed.config_sha256);
  j["tokenizer_sha256"] = ToHex(in.seed.tokenizer_sha256);
  j["table_digest"] = ToHex(in.seed.table_digest);
  j["inv_freq_table_digest"] = ToHex(in.seed.inv_freq_table_digest);
  j["prompt_token_ids"] = d.prompt;
  j["generated_token_ids"] = d.generated;
  json steps = json::array();
  for (size_t s = 0; s < d.generated.size(); ++s) {
    json step;
    step["token"] = d.generated[s];
    if (s < d.logits_sha256.size()) step["logits_sha256"] = ToHex(d.logits_sha256[s]);
    steps.push_back(std::move(step));
  }
  j["steps"] = std::move(steps);
  if (!d.layer_digests.empty()) j["trace"] = TraceJson(d.layer_digests);
  j["argmax_digest"] = ToHex(d.argmax_digest);
  j["cis2_ref"] = ToHex(d.cis2_ref);
  json options;
  options["gen"] = d.generated.size();
  if (in.window) options["window"] = *in.window;
  json ev = json::array();
  for (const EvictSpec& e : in.evictions) ev.push_back(EvictText(e));
  options["evictions"] = std::move(ev);
  if (in.sampling.temperature == 0.0f) {
    options["sampling"] = "greedy";
  } else {  // every float is exact as a JSON double and parses back to itself
    options["sampling"] = {{"temperature", in.sampling.temperature},
                           {"top_k", in.sampling.top_k},
                           {"top_p", in.sampling.top_p},
                           {"seed", in.sampling.seed}};
  }
  if (!in.speculative.empty()) options["speculative"] = in.speculative;
  j["options"] = std::move(options);
  j["plan"] = in.plan.empty() ? "monolithic" : in.plan;
  json workers = json::array();
  for (const WorkerEntry& w : in.workers) {
    json e;
    e["endpoint"] = w.endpoint;
    e["layers"] = {w.first_layer, w.end_layer};
    if (!w.curve_public_z85.empty()) e["curve_public"] = w.curve_public_z85;
    workers.push_back(std::move(e));
  }
  j["workers"] = std::move(workers);
  if (in.generated_text) j["generated_text"] = StoredText(*in.generated_text);
  if (in.compared_with_monolithic) j["sharded_equals_monolithic"] = true;
  if (!in.timings.empty()) {
    json t;
    for (const auto& [name, value] : in.timings) t[name] = value;
    j["timings"] = std::move(t);
  }
  return j;
}

std::string CanonicalBytes(const json& receipt) {
  json copy = receipt;
  if (copy.is_object()) copy.erase("signature");
  return copy.dump(-1, ' ', true, json::error_handler_t::replace);
}

Status SignReceipt(json* receipt, const keys::Identity& signer) {
  receipt->erase("signature");
  const std::string bytes = CanonicalBytes(*receipt);
  LOCKSTEP_ASSIGN_OR_RETURN(keys::Ed25519Signature sig,
                            keys::Ed25519Sign(signer.sign_seed,
                                              std::span<const uint8_t>(
                                                  reinterpret_cast<const uint8_t*>(bytes.data()),
                                                  bytes.size())));
  (*receipt)["signature"] = {{"algorithm", "ed25519"},
                             {"public_key", keys::SignPublicHex(signer.pub)},
                             {"value", Hex(sig.data(), sig.size())}};
  return Status::Ok();
}

Status CheckSignature(const json& receipt, const std::optional<keys::Ed25519Public>& trusted) {
  if (!receipt.is_object() || !receipt.contains("signature")) {
    return MismatchError("the receipt is not signed");
  }
  const json& sig = receipt["signature"];
  if (!sig.is_object() || sig.value("algorithm", json()) != "ed25519" ||
      !sig.contains("public_key") || !sig["public_key"].is_string() || !sig.contains("value") ||
      !sig["value"].is_string()) {
    return InvalidError("signature: expected {\"algorithm\": \"ed25519\", \"public_key\", \"value\"}");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(keys::Ed25519Public pub,
                            keys::ParseSignPublicHex(sig["public_key"].get<std::string>()));
  const std::string value = sig["value"].get<std::string>();
  if (value.size() != 128) return InvalidError("signature.value: expected 128 hex characters");
  keys::Ed25519Signature raw{};
  for (size_t half = 0; half < 2; ++half) {
    Result<Digest> part = DigestFromHex(value.substr(half * 64, 64));
    if (!part.ok()) return InvalidError("signature.value: not a hex string");
    std::copy(part->begin(), part->end(), raw.begin() + half * 32);
  }
  if (trusted && *trusted != pub) {
    return MismatchError("signed by another key: " + sig["public_key"].get<std::string>() +
                         " is not the trusted key " + Hex(trusted->data(), trusted->size()));
  }
  const std::string bytes = CanonicalBytes(receipt);
  Status st = keys::Ed25519Verify(
      pub, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
      raw);
  if (!st.ok()) {
    return MismatchError("receipt signature does not verify: the receipt was changed after "
                         "signing (or the signature is forged)");
  }
  return Status::Ok();
}

Result<ParsedReceipt> ParseReceipt(const json& j) {
  const std::string R = "receipt";
  if (!j.is_object()) return InvalidError("receipt: is not a JSON object");
  ParsedReceipt p;
  LOCKSTEP_ASSIGN_OR_RETURN(const json* ver, Member(j, "receipt_version", R));
  if (!ver->is_number_integer() || ver->get<int64_t>() != kReceiptVersion) {
    return InvalidError("receipt.receipt_version: this build reads version " +
                        std::to_string(kReceiptVersion) + ", got " + ver->dump());
  }
  p.version = kReceiptVersion;
  LOCKSTEP_ASSIGN_OR_RETURN(p.seed.weights_sha256, DigestMember(j, "weights_sha256", R));
  LOCKSTEP_ASSIGN_OR_RETURN(p.seed.config_sha256, DigestMember(j, "config_sha256", R));
  LOCKSTEP_ASSIGN_OR_RETURN(p.seed.tokenizer_sha256, DigestMember(j, "tokenizer_sha256", R));
  LOCKSTEP_ASSIGN_OR_RETURN(p.seed.table_digest, DigestMember(j, "table_digest", R));
  LOCKSTEP_ASSIGN_OR_RETURN(p.seed.inv_freq_table_digest, DigestMember(j, "inv_freq_table_digest", R));
  LOCKSTEP_ASSIGN_OR_RETURN(p.prompt, IdsMember(j, "prompt_token_ids", R));
  if (p.prompt.empty()) return InvalidError("receipt.prompt_token_ids: empty");
  LOCKSTEP_ASSIGN_OR_RETURN(p.generated, IdsMember(j, "generated_token_ids", R));
  LOCKSTEP_ASSIGN_OR_RETURN(p.argmax_digest, DigestMember(j, "argmax_digest", R));
  LOCKSTEP_ASSIGN_OR_RETURN(p.cis2_ref, DigestMember(j, "cis2_ref", R));

  LOCKSTEP_ASSIGN_OR_RETURN(const json* steps, Member(j, "steps", R));
  if (!steps->is_array()) return InvalidError("receipt.steps: expected an array");
  for (size_t s = 0; s < steps->size(); ++s) {
    const std::string where = "receipt.steps[" + std::to_string(s) + "]";
    const json& step = (*steps)[s];
    LOCKSTEP_ASSIGN_OR_RETURN(const json* tok, Member(step, "token", where));
    LOCKSTEP_ASSIGN_OR_RETURN(uint32_t token, U32(*tok, where + ".token"));
    LOCKSTEP_ASSIGN_OR_RETURN(Digest h, DigestMember(step, "logits_sha256", where));
    if (s >= p.generated.size() || p.generated[s] != token) {
      return InvalidError(where + ".token " + std::to_string(token) +
                          " disagrees with generated_token_ids");
    }
    p.logits_sha256.push_back(h);
  }

  LOCKSTEP_ASSIGN_OR_RETURN(const json* options, Member(j, "options", R));
  LOCKSTEP_ASSIGN_OR_RETURN(const json* gen, Member(*options, "gen", R + ".options"));
  LOCKSTEP_ASSIGN_OR_RETURN(p.gen, U32(*gen, R + ".options.gen"));
  if (p.generated.size() != p.gen || p.logits_sha256.size() != p.gen) {
    return InvalidError("receipt: options.gen is " + std::to_string(p.gen) + " but it lists " +
                        std::to_string(p.generated.size()) + " generated ids and " +
                        std::to_string(p.logits_sha256.size()) + " steps (steps removed or added?)");
  }
  if (options->contains("window")) {
    const json& w = (*options)["window"];
    if (!w.is_number_integer() || w.get<int64_t>() < 0 ||
        w.get<int64_t>() > std::numeric_limits<int>::max()) {
      return InvalidError("receipt.options.window: expected a non-negative integer");
    }
    p.window = static_cast<int>(w.get<int64_t>());
  }
  if (options->contains("evictions")) {
    const json& ev = (*options)["evictions"];
    if (!ev.is_array()) return InvalidError("receipt.options.evictions: expected an array");
    for (const json& e : ev) {
      if (!e.is_string()) return InvalidError("receipt.options.evictions: expected strings");
      Result<EvictSpec> spec = ParseEvictSpec(e.get<std::string>());
      if (!spec.ok()) return spec.status().WithContext("receipt.options.evictions");
      p.evictions.push_back(*spec);
    }
  }
  if (options->contains("sampling") && (*options)["sampling"] != "greedy") {
    const json& s = (*options)["sampling"];
    const std::string where = R + ".options.sampling";
    if (!s.is_object() || !s.contains("temperature") || !s["temperature"].is_number() ||
        !s.contains("top_k") || !s["top_k"].is_number_unsigned() || !s.contains("top_p") ||
        !s["top_p"].is_number() || !s.contains("seed") || !s["seed"].is_number_unsigned()) {
      return InvalidError(where + ": expected \"greedy\" or {temperature, top_k, top_p, seed}");
    }
    p.sampling.temperature = static_cast<float>(s["temperature"].get<double>());
    p.sampling.top_k = s["top_k"].get<uint32_t>();
    p.sampling.top_p = static_cast<float>(s["top_p"].get<double>());
    p.sampling.seed = s["seed"].get<uint64_t>();
    LOCKSTEP_RETURN_IF_ERROR(ValidateSamplingParams(p.sampling).WithContext(where));
  }
  if (j.contains("plan")) {
    if (!j["plan"].is_string()) return InvalidError("receipt.plan: expected a string");
    p.plan = j["plan"].get<std::string>();
  }
  if (j.contains("workers")) {
    const json& ws = j["workers"];
    if (!ws.is_array()) return InvalidError("receipt.workers: expected an array");
    for (size_t i = 0; i < ws.size(); ++i) {
      const std::string where = "receipt.workers[" + std::to_string(i) + "]";
      const json& w = ws[i];
      WorkerEntry e;
      if (!w.is_object() || !w.contains("endpoint") || !w["endpoint"].is_string() ||
          !w.contains("layers") || !w["layers"].is_array() || w["layers"].size() != 2) {
        return InvalidError(where + ": expected {\"endpoint\", \"layers\": [first, end]}");
      }
      e.endpoint = w["endpoint"].get<std::string>();
      LOCKSTEP_ASSIGN_OR_RETURN(e.first_layer, U32(w["layers"][0], where + ".layers[0]"));
      LOCKSTEP_ASSIGN_OR_RETURN(e.end_layer, U32(w["layers"][1], where + ".layers[1]"));
      if (w.contains("curve_public")) {
        if (!w["curve_public"].is_string()) return InvalidError(where + ".curve_public: expected a string");
        e.curve_public_z85 = w["curve_public"].get<std::string>();
      }
      p.workers.push_back(std::move(e));
    }
  }
  if (j.contains("generated_text")) {
    if (!j["generated_text"].is_string()) return InvalidError("receipt.generated_text: expected a string");
    p.generated_text = j["generated_text"].get<std::string>();
  }
  if (j.contains("trace")) {
    LOCKSTEP_ASSIGN_OR_RETURN(p.trace, ParseTrace(j["trace"], p.generated.size()));
  }
  p.signed_ = j.contains("signature");
  return p;
}

Result<json> ReadReceiptFile(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(const std::string text,
                            ReadSmallFile(path, kMaxReceiptBytes, "a receipt"));
  LOCKSTEP_ASSIGN_OR_RETURN(json j, ParseJsonStrict(text, path, ErrorKind::kInvalid));
  if (!j.is_object()) return InvalidError(path + ": not a JSON object");
  return j;
}

std::optional<Divergence> FirstDivergence(const ParsedReceipt& r, const DecodeResult& c) {
  if (r.prompt != c.prompt) return Divergence{"prompt_token_ids differ"};
  const size_t n = std::min(r.generated.size(), c.generated.size());
  for (size_t s = 0; s < n; ++s) {
    if (!r.trace.empty()) {
      const auto* again = s < c.layer_digests.size() ? &c.layer_digests[s] : nullptr;
      if (auto d = StepTraceDivergence(r.trace[s], again, r.workers, s)) return Divergence{*d};
    }
    const bool logits_differ = s < c.logits_sha256.size() && r.logits_sha256[s] != c.logits_sha256[s];
    if (logits_differ || r.generated[s] != c.generated[s]) {
      std::string what = "step " + std::to_string(s) + ":";
      if (logits_differ) {
        what += " logits_sha256 receipt " + Short(r.logits_sha256[s]) + " recomputed " +
                Short(c.logits_sha256[s]) + ";";
      }
      what += " token receipt " + std::to_string(r.generated[s]) + " recomputed " +
              std::to_string(c.generated[s]);
      return Divergence{what};
    }
  }
  if (r.generated.size() != c.generated.size()) {
    return Divergence{"receipt has " + std::to_string(r.generated.size()) + " steps, recomputed " +
                      std::to_string(c.generated.size())};
  }
  if (r.argmax_digest != c.argmax_digest) {
    return Divergence{"argmax_digest receipt " + ToHex(r.argmax_digest) + " recomputed " +
                      ToHex(c.argmax_digest)};
  }
  if (r.cis2_ref != c.cis2_ref) {
    return Divergence{"cis2_ref receipt " + ToHex(r.cis2_ref) + " recomputed " + ToHex(c.cis2_ref)};
  }
  return std::nullopt;
}

std::optional<Divergence> TextDivergence(const ParsedReceipt& r, const std::string& text) {
  const std::string stored = StoredText(text);
  if (!r.generated_text || *r.generated_text == stored) return std::nullopt;
  auto quoted = [](const std::string& s) { return json(s).dump(-1, ' ', true, json::error_handler_t::replace); };
  return Divergence{"generated_text is not the text of the generated tokens: receipt " +
                    quoted(*r.generated_text) + " recomputed " + quoted(stored)};
}

}  // namespace lockstep::receipt
