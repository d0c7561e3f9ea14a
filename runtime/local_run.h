// A monolithic decode in this process: one Stage with every layer, a
// LocalBackend per run (its KV cache reserved for the whole request), the
// §12.4 double run unless asked for one. `lockstep run`, `--compare-
// monolithic`, `lockstep verify` and `lockstep bench` decode through here.
#pragma once

#include <optional>

#include "engine/model_loader.h"
#include "engine/stage.h"
#include "runtime/checked_decode.h"

namespace lockstep::runtime {

struct LocalRunOptions {
  std::optional<int> window;  // sliding window for every layer (--window)
  ComputeOptions compute;     // kernels and threads: the same bits for every choice
  int runs = 2;               // 2: the §12.4 check; 1: decode once
  bool trace = false;         // per-layer digests in DecodeResult::layer_digests
  Decoder decode{};           // empty: RunDecode (checked_decode.h)
};

// REQUIRES: stage holds every layer (first and last). `stage` must outlive the call.
// window: overrides req.window when set.
Result<TimedResult> DecodeOnStage(const Stage& stage, const WitnessSeed& seed,
                                  const DecodeRequest& req, std::optional<int> window, int runs,
                                  bool trace = false, const Decoder& decode = {});

// LoadStage(model, every layer, o.compute), then DecodeOnStage.
Result<TimedResult> RunMonolithic(OpenModel& model, const DecodeRequest& req,
                                  const LocalRunOptions& o);

}  // namespace lockstep::runtime
