// `--speculative` and `--draft-model` for the commands that decode (run,
// coordinator): the flags, the draft model they load, the decoder they
// select and the note they print. Speculative decoding
// (engine/speculative.h) gives the plain decode's tokens, digests and
// receipt; only options.speculative, which no digest covers, says so and
// names the proposal source.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "engine/model_loader.h"
#include "engine/same_tokenizer.h"
#include "engine/speculative.h"
#include "runtime/checked_decode.h"

namespace lockstep::cli {

// Adds --speculative (setting *on) and --draft-model PATH (setting *draft
// and *on) to `cmd`.
void AddSpeculativeFlags(CLI::App* cmd, bool* on, std::string* draft);

// A loaded draft model (engine/draft_proposals.h): its open checkpoint,
// its whole-model stage, the positions it supports and the wall time the
// last decode spent in it (between the target's steps, so outside
// decode_ms_per_token).
struct DraftModel {
  OpenModel model;
  LoadedStage stage;
  uint32_t max_positions = 0;
  double proposing_ms = 0;
};

// What a --draft-model must share with the model it drafts for: its tokenizer.
TokenizerIdentity TargetTokenizer(const ModelInfo& model);

// Loads the draft model at `path` (a folder or a .gguf file, as --model)
// with `compute`; null when path is empty. The load's own errors say
// "--draft-model PATH"; Mismatch naming both models when its tokenizer is
// not the target's (engine/same_tokenizer.h).
Result<std::unique_ptr<DraftModel>> LoadDraftModel(const std::string& path,
                                                   const TokenizerIdentity& target,
                                                   const ComputeOptions& compute);

// The decoder for `on`: plain (empty) or speculative, its proposals from
// `draft` (each decode a fresh draft cache) or, when null, prompt lookup,
// counting into *stats (the last decode's: the §12.4 second run repeats
// the first).
runtime::Decoder DecoderFor(bool on, SpeculativeStats* stats, DraftModel* draft = nullptr);

// options.speculative for a run: "" (plain), "prompt-lookup" or "draft-model".
std::string SpeculativeSource(bool on, const DraftModel* draft);

// "speculative = K of P proposed tokens kept (..%), N multi-row steps",
// and with a draft a second line with its proposing time.
std::string SpeculativeNote(const SpeculativeStats& s, const DraftModel* draft = nullptr);

}  // namespace lockstep::cli
