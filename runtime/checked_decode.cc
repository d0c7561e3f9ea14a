#include "runtime/checked_decode.h"

#include <cassert>

#include "runtime/compare.h"

namespace lockstep::runtime {

Result<TimedResult> DecodeChecked(const BackendFactory& open, const DecodeRequest& req,
                                  const WitnessSeed& seed, int runs, const Decoder& decoder) {
  assert(runs == 1 || runs == 2);
  const Decoder& decode = decoder ? decoder : Decoder(RunDecode);
  TimedResult out;
  out.started = TimedBackend::Clock::now();
  {
    LOCKSTEP_ASSIGN_OR_RETURN(std::unique_ptr<StepBackend> backend, open());
    TimedBackend timed(*backend);
    LOCKSTEP_ASSIGN_OR_RETURN(out.result, decode(timed, req, seed));
    out.decode_ms_per_token = timed.mean_step_ms();
    out.decode_steps = timed.steps();
    out.first_token = timed.first_feed_done().value_or(out.started);
    out.first_token_cpu_s = timed.first_feed_done_cpu_s();
    out.finished = TimedBackend::Clock::now();
  }
  if (runs == 2) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::unique_ptr<StepBackend> backend, open());
    LOCKSTEP_ASSIGN_OR_RETURN(DecodeResult again, decode(*backend, req, seed));
    const Status same = CompareResults(out.result, again, "run 1", "run 2");
    if (!same.ok()) {
      return InternalError("determinism check (§12.4) failed: two runs in one process differ (" +
                           same.message() + ")");
    }
  }
  return out;
}

}  // namespace lockstep::runtime
