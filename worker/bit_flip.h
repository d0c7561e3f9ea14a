// BitFlip: test-only fault injection (builds with LOCKSTEP_FAULT_INJECTION,
// never the shipped `lockstep`). A LayerObserver that flips bit 22 (the
// top mantissa bit) of element `index` of the hidden state after layer
// `layer` of step `step`, then passes the rows on to the next observer
// (the trace, if any), so the trace records the corrupted state. Read from
// LOCKSTEP_FAULT_FLIP="STEP:LAYER:INDEX". Thread-compatible.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <span>

#include "engine/layer_trace.h"

namespace lockstep {

class BitFlip final : public LayerObserver {
 public:
  // nullopt when the variable is unset or malformed.
  static std::optional<BitFlip> FromEnv() {
    const char* v = std::getenv("LOCKSTEP_FAULT_FLIP");
    BitFlip f;
    if (v == nullptr || std::sscanf(v, "%u:%d:%zu", &f.step_, &f.layer_, &f.index_) != 3) {
      return std::nullopt;
    }
    return f;
  }

  // The observer to use for a Forward of step `step`: this (chained to
  // `next`) when the fault fires at that step, else `next`.
  LayerObserver* For(uint32_t step, LayerObserver* next) {
    next_ = next;
    return step == step_ ? this : next;
  }

  void AfterLayer(int layer, std::span<float> hidden) override {
    if (layer == layer_ && index_ < hidden.size()) {
      uint32_t bits;
      std::memcpy(&bits, &hidden[index_], 4);
      bits ^= 1u << 22;
      std::memcpy(&hidden[index_], &bits, 4);
    }
    if (next_ != nullptr) next_->AfterLayer(layer, hidden);
  }

 private:
  uint32_t step_ = 0;
  int layer_ = 0;
  size_t index_ = 0;
  LayerObserver* next_ = nullptr;
};

}  // namespace lockstep
