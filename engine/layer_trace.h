// LayerObserver: sees the residual stream after every layer Stage::Forward
// runs (set on the caller's ForwardScratch; null, the default, costs one
// pointer test per layer). LayerTrace is the observer of the receipts'
// trace mode (docs/receipts.md): the sha256 of the hidden state after each
// layer, so two runs can be compared layer by layer.
// Thread-compatible: an observer belongs to the scratch's caller.
#pragma once

#include <span>
#include <vector>

#include "base/sha256.h"

namespace lockstep {

class LayerObserver {
 public:
  virtual ~LayerObserver() = default;
  // hidden: [rows][hidden], the rows of this Forward after layer `layer`.
  // An observer may change it (test-only fault injection does).
  virtual void AfterLayer(int layer, std::span<float> hidden) = 0;
};

// digests()[i]: sha256 of the [rows][hidden] binary32 bytes (little-endian)
// after the i-th layer observed since Clear().
class LayerTrace final : public LayerObserver {
 public:
  // reserve: layers per step, so that tracing a step allocates nothing.
  explicit LayerTrace(size_t reserve = 0) { digests_.reserve(reserve); }
  // Starts a step; `earlier`: the digests of the layers before the first
  // one this observer will see (earlier pipeline stages').
  void Clear(std::span<const Digest> earlier = {}) { digests_.assign(earlier.begin(), earlier.end()); }
  void AfterLayer(int layer, std::span<float> hidden) override;
  const std::vector<Digest>& digests() const { return digests_; }

 private:
  std::vector<Digest> digests_;  // [layers observed]
};

// The digest LayerTrace records for `hidden`.
Digest HiddenSha256(std::span<const float> hidden);

}  // namespace lockstep
