// `--speculative` for the commands that decode (run, coordinator): the
// flag, the decoder it selects and the note it prints. Speculative
// decoding (engine/speculative.h) gives the plain decode's tokens, digests
// and receipt; only options.speculative, which no digest covers, says so.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "engine/speculative.h"
#include "runtime/checked_decode.h"

namespace lockstep::cli {

// Adds --speculative to `cmd`, setting *on.
void AddSpeculativeFlag(CLI::App* cmd, bool* on);

// The decoder for `on`: plain (empty) or speculative, counting into *stats
// (the last decode's: the §12.4 second run repeats the first).
runtime::Decoder DecoderFor(bool on, SpeculativeStats* stats);

// "speculative = K of P proposed tokens kept (..%), N multi-row steps".
std::string SpeculativeNote(const SpeculativeStats& s);

}  // namespace lockstep::cli
