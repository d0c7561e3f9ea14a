#include "cli/speculative_option.h"

#include <cstdio>

namespace lockstep::cli {

void AddSpeculativeFlag(CLI::App* cmd, bool* on) {
  cmd->add_flag("--speculative", *on,
                "Exact speculative decoding: prompt-lookup proposals checked several per pass "
                "(the same tokens, digests and receipt; options.speculative says so)");
}

runtime::Decoder DecoderFor(bool on, SpeculativeStats* stats) {
  if (!on) return {};
  return [stats](StepBackend& backend, const DecodeRequest& req, const WitnessSeed& seed) {
    *stats = {};
    return RunSpeculativeDecode(backend, req, seed, SpeculativeOptions{}, stats);
  };
}

std::string SpeculativeNote(const SpeculativeStats& s) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "speculative           = %llu of %llu proposed tokens kept (%.1f%%), %llu multi-row steps",
                static_cast<unsigned long long>(s.accepted), static_cast<unsigned long long>(s.proposed),
                s.proposed ? 100.0 * static_cast<double>(s.accepted) / static_cast<double>(s.proposed) : 0.0,
                static_cast<unsigned long long>(s.passes));
  return buf;
}

}  // namespace lockstep::cli
