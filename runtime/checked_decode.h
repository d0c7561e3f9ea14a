// DecodeChecked: a decode (RunDecode unless a Decoder says otherwise:
// speculative decoding, teacher forcing) on fresh backends, once or twice
// (the §12.4 same-process determinism check: the whole decode again on a
// new backend, every digest compared by CompareResults), timing the first
// run's decode steps through a TimedBackend. Every front end's decode (run
// monolithic and sharded, coordinator, verify, bench) goes through it.
#pragma once

#include <functional>
#include <memory>

#include "base/status.h"
#include "engine/decode.h"
#include "engine/witness.h"
#include "runtime/timed_backend.h"

namespace lockstep::runtime {

// A decode's result with the timings of its first run.
struct TimedResult {
  DecodeResult result;
  double decode_ms_per_token = 0;  // mean wall time of a single-token Feed
  int decode_steps = 0;            // single-token Feeds timed
  TimedBackend::Clock::time_point started;      // just before the first backend opened
  TimedBackend::Clock::time_point first_token;  // the first Feed returned
  TimedBackend::Clock::time_point finished;     // the first run's decode returned
  double first_token_cpu_s = 0;                 // process CPU seconds then
};

// Opens a new backend for one whole decode (a session).
using BackendFactory = std::function<Result<std::unique_ptr<StepBackend>>()>;

// How one decode runs on an open backend. Every decoder gives RunDecode's
// result for the request (engine/speculative.h, engine/teacher_forcing.h).
using Decoder = std::function<Result<DecodeResult>(StepBackend&, const DecodeRequest&,
                                                   const WitnessSeed&)>;

// runs: 1 (no check) or 2 (§12.4). Internal error naming what differs when
// the two runs do. decode: empty for RunDecode.
Result<TimedResult> DecodeChecked(const BackendFactory& open, const DecodeRequest& req,
                                  const WitnessSeed& seed, int runs, const Decoder& decode = {});

}  // namespace lockstep::runtime
