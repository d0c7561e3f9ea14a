// The receipt's trace member (docs/receipts.md, "Trace"): per step, per
// layer, the sha256 of the hidden state after that layer, and the reading
// of it that names the first (step, layer) where a recomputation departs
// and the worker that computed that layer. Stateless functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"

namespace lockstep::receipt {

inline constexpr int kTraceVersion = 1;

struct WorkerEntry;

// [step][layer] digests -> {"version": 1, "layers": L, "steps": [[hex, ...], ...]}.
// REQUIRES: every step has the same number of layers.
nlohmann::json TraceJson(const std::vector<std::vector<Digest>>& steps);

// Invalid naming the member unless `trace` is that shape with `steps`
// steps of the same non-zero number of layers and a known version.
Result<std::vector<std::vector<Digest>>> ParseTrace(const nlohmann::json& trace, size_t steps);

// Who computed `layer`: "worker ENDPOINT (layers [a,b), curve_public K)" from
// the receipt's workers, or "the monolithic run" when it lists none.
std::string LayerOwner(const std::vector<WorkerEntry>& workers, uint32_t layer);

// The first layer of step `step` whose digest differs (both values and its
// owner), or a count mismatch; nullopt when the step's trace agrees.
std::optional<std::string> StepTraceDivergence(const std::vector<Digest>& receipt,
                                               const std::vector<Digest>* recomputed,
                                               const std::vector<WorkerEntry>& workers,
                                               size_t step);

}  // namespace lockstep::receipt
