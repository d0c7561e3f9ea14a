#include "runtime/local_run.h"

#include <iostream>

#include "engine/local_backend.h"

namespace lockstep::runtime {

Result<TimedResult> DecodeOnStage(const Stage& stage, const WitnessSeed& seed,
                                  const DecodeRequest& req, std::optional<int> window, int runs,
                                  bool trace, const Decoder& decode) {
  const size_t positions = req.prompt.size() + req.gen;
  if (!window) window = req.window;  // the request's own, unless overridden
  const BackendFactory open = [&]() -> Result<std::unique_ptr<StepBackend>> {
    auto backend = std::make_unique<LocalBackend>(stage, positions);
    if (window) LOCKSTEP_RETURN_IF_ERROR(backend->SetWindow(*window));
    if (trace) backend->EnableTrace();
    return std::unique_ptr<StepBackend>(std::move(backend));
  };
  return DecodeChecked(open, req, seed, runs, decode);
}

Result<TimedResult> RunMonolithic(OpenModel& model, const DecodeRequest& req,
                                  const LocalRunOptions& o) {
  const StageSpec all{0, model.config.num_layers, true, true};
  LOCKSTEP_ASSIGN_OR_RETURN(LoadedStage stage, LoadStage(model, all, o.compute));
  if (!stage.weight_cache_note.empty()) std::cerr << "lockstep: " << stage.weight_cache_note << "\n";
  return DecodeOnStage(*stage, model.Seed(), req, o.window, o.runs, o.trace, o.decode);
}

}  // namespace lockstep::runtime
