// The cluster config (configs/*.json) and pipeline plans.
//
//   {"model": "/models/smollm2",            // folder, as the workers see it
//    "pins": {"weights_sha256": "..."},     // optional, as a manifest
//    "workers": ["tcp://10.0.0.1:5555", ...],
//    "plan": "auto" | [[0,10],[10,20],[20,30]],
//    "plan_balance": "memory" | "memory+work",  // what "auto" balances
//    "heartbeat_ms": 250, "liveness": 8, "request_timeout_ms": 30000,
//    "key": "coordinator.key",               // this coordinator's key file
//    "worker_keys": ["w0.pub", ...],         // one per worker, same order
//    "insecure": false,
//    "ship_logits": false,                   // logits to the coordinator (see below)
//    "spares": [{"endpoint": "tcp://10.0.0.9:5555", "key": "w9.pub"}]}
//
// Links are CURVE (wire/link_security.h): the coordinator presents "key"
// (written by `lockstep keygen`) and pins each worker's public key from
// "worker_keys". Both are required for tcp/ipc workers unless "insecure":
// true chooses plaintext. Key paths are relative to the config file.
//
// By default the last stage chooses each token and folds the witness chain
// (docs/wire_protocol.md, "Chain handoff"), so no logits cross the network;
// "ship_logits": true sends every step's logits to the coordinator, which
// chooses and folds them itself (same digests; for debugging and for a
// coordinator that checks the logits).
//
// "spares" are idle workers a dead stage is rebuilt on (docs/deployment.md,
// "Recovery"); each is used at most once. A spare may name a worker's own
// address: a worker restarted there (same key) takes its stage back.
//
// A plan is one half-open layer range per worker, in pipeline order. It is
// valid when it has exactly one non-empty range per worker, the ranges are
// contiguous, and together they cover [0, num_layers) exactly. Plain data
// and stateless functions; thread-safe.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/io/model_config.h"
#include "engine/io/model_files.h"
#include "engine/model_loader.h"
#include "engine/stage_bytes.h"
#include "engine/weights.h"
#include "wire/link_security.h"

namespace lockstep {

struct LayerRange {
  int lo = 0;  // first layer
  int hi = 0;  // one past the last
  bool operator==(const LayerRange&) const = default;
};

// A worker held in reserve: its endpoint and pinned Z85 public key ("" on
// insecure or inproc links).
struct SpareWorker {
  std::string endpoint;
  std::string key;
};

// What the automatic plan balances across stages: each stage's resident
// weight bytes, or those plus the bytes one token reads of them (its
// per-token work: on a MoE layer the router and k experts, not all).
enum class PlanBalance { kMemory, kMemoryAndWork };

struct ClusterConfig {
  std::string model_dir;
  ModelPins pins;
  std::vector<std::string> workers;  // endpoints, pipeline order
  bool auto_plan = true;
  std::vector<LayerRange> plan;      // when !auto_plan
  PlanBalance plan_balance = PlanBalance::kMemory;  // when auto_plan
  std::chrono::milliseconds heartbeat{250};
  int liveness = 8;                  // missed heartbeats before a worker is dead
  std::chrono::milliseconds request_timeout{30000};
  bool insecure = false;                 // plaintext links, chosen explicitly
  bool ship_logits = false;              // `--ship-logits`: logits to the coordinator
  wire::CurveKeyPair key;                // the coordinator's own CURVE key pair
  std::vector<std::string> worker_keys;  // Z85 public keys, `workers` order
  std::vector<SpareWorker> spares;       // replacements for dead stages, in order of use
};

// Invalid naming the file and key for unknown keys, wrong types or values;
// key files are read (keys/identity.h) relative to `base_dir`.
Result<ClusterConfig> LoadClusterConfig(const std::string& path);
Result<ClusterConfig> ParseClusterConfig(std::string_view json_text, const std::string& name,
                                         const std::string& base_dir = ".");

// "memory" | "memory+work" (Invalid otherwise).
Result<PlanBalance> ParsePlanBalance(const std::string& text);

// "0:10,10:20,20:30" <-> ranges. Parse checks syntax only.
Result<std::vector<LayerRange>> ParsePlanText(const std::string& text);
std::string PlanText(const std::vector<LayerRange>& plan);

// Invalid with a message naming the offending range (see file comment).
Status ValidatePlan(const std::vector<LayerRange>& plan, int num_layers, size_t workers);

// Contiguous non-empty ranges for `workers` stages minimising the largest
// stage cost: its share of `bytes` (ModelBytes::Stage, the checkpoint's
// own tensor sizes, so MoE layers and quantized tensors weigh what they
// weigh), resident only or resident + per token as `balance` says.
// REQUIRES: 1 <= workers <= bytes.layers.size().
std::vector<LayerRange> AutoPlan(const ModelBytes& bytes, size_t workers, PlanBalance balance);

// The plan (auto, from the checkpoint's tensor sizes, or explicit;
// validated) as StageSpecs with first/last set. Errors name the plan or
// the checkpoint; nothing is loaded.
Result<std::vector<StageSpec>> ResolvePlan(const ClusterConfig& cfg, const ModelInfo& model);

}  // namespace lockstep
