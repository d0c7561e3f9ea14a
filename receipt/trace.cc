#include "receipt/trace.h"

#include "receipt/receipt.h"

namespace lockstep::receipt {

using nlohmann::json;

json TraceJson(const std::vector<std::vector<Digest>>& steps) {
  json out;
  out["version"] = kTraceVersion;
  out["layers"] = steps.empty() ? 0 : steps[0].size();
  json list = json::array();
  for (const std::vector<Digest>& step : steps) {
    json layers = json::array();
    for (const Digest& d : step) layers.push_back(ToHex(d));
    list.push_back(std::move(layers));
  }
  out["steps"] = std::move(list);
  return out;
}

Result<std::vector<std::vector<Digest>>> ParseTrace(const json& t, size_t steps) {
  const std::string R = "receipt.trace";
  if (!t.is_object() || !t.contains("version") || !t.contains("layers") || !t.contains("steps")) {
    return InvalidError(R + ": expected {\"version\", \"layers\", \"steps\"}");
  }
  if (t["version"] != kTraceVersion) {
    return InvalidError(R + ".version: this build reads version " + std::to_string(kTraceVersion) +
                        ", got " + t["version"].dump());
  }
  const json& layers = t["layers"];
  if (!layers.is_number_unsigned() || layers.get<uint64_t>() == 0 || layers.get<uint64_t>() > 4096) {
    return InvalidError(R + ".layers: expected an integer in [1, 4096]");
  }
  const size_t n = layers.get<size_t>();
  const json& list = t["steps"];
  if (!list.is_array() || list.size() != steps) {
    return InvalidError(R + ".steps: expected one entry per step (" + std::to_string(steps) +
                        "; steps removed or added?)");
  }
  std::vector<std::vector<Digest>> out(steps);
  for (size_t s = 0; s < steps; ++s) {
    const std::string where = R + ".steps[" + std::to_string(s) + "]";
    if (!list[s].is_array() || list[s].size() != n) {
      return InvalidError(where + ": expected " + std::to_string(n) + " layer digests");
    }
    for (size_t l = 0; l < n; ++l) {
      const json& h = list[s][l];
      Result<Digest> d = h.is_string() ? DigestFromHex(h.get<std::string>())
                                       : Result<Digest>(InvalidError("not a string"));
      if (!d.ok()) return InvalidError(where + "[" + std::to_string(l) + "]: expected 64 hex characters");
      out[s].push_back(*d);
    }
  }
  return out;
}

std::string LayerOwner(const std::vector<WorkerEntry>& workers, uint32_t layer) {
  if (workers.empty()) return "the monolithic run";
  for (size_t k = 0; k < workers.size(); ++k) {
    const WorkerEntry& w = workers[k];
    if (layer < w.first_layer || layer >= w.end_layer) continue;
    std::string who = "worker " + w.endpoint + " (stage " + std::to_string(k) + ", layers [" +
                      std::to_string(w.first_layer) + "," + std::to_string(w.end_layer) + ")";
    if (!w.curve_public_z85.empty()) who += ", curve_public " + w.curve_public_z85;
    return who + ")";
  }
  return "no worker of the receipt's plan";
}

std::optional<std::string> StepTraceDivergence(const std::vector<Digest>& receipt,
                                               const std::vector<Digest>* recomputed,
                                               const std::vector<WorkerEntry>& workers,
                                               size_t step) {
  const std::string at = "step " + std::to_string(step);
  if (recomputed == nullptr) return at + ": the recomputation has no trace";
  if (recomputed->size() != receipt.size()) {
    return at + ": the trace has " + std::to_string(receipt.size()) + " layers, recomputed " +
           std::to_string(recomputed->size());
  }
  for (size_t l = 0; l < receipt.size(); ++l) {
    if (receipt[l] == (*recomputed)[l]) continue;
    return at + " layer " + std::to_string(l) + ": hidden_sha256 receipt " + ToHex(receipt[l]) +
           " recomputed " + ToHex((*recomputed)[l]) + "; computed by " +
           LayerOwner(workers, static_cast<uint32_t>(l));
  }
  return std::nullopt;
}

}  // namespace lockstep::receipt
