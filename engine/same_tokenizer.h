// Whether two models share a tokenizer, as a draft model for speculative
// decoding must share the target's (engine/draft_proposals.h): the same
// vocabulary size, the same end-of-sequence ids when both name some (a
// model naming none says nothing to compare) and, when both keep a
// tokenizer.json beside their config, the same tokenizer.json bytes
// (sha256). A .gguf file's tokenizer has no digest of its own (the file's
// one digest covers everything, EXTENSIONS.md E2.5), so a .gguf on either
// side is compared by vocabulary size and end-of-sequence ids alone.
// Plain data and stateless functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "engine/io/model_config.h"
#include "engine/io/model_files.h"

namespace lockstep {

struct TokenizerIdentity {
  std::string model;                    // the model's path, for messages
  bool gguf = false;                    // the tokenizer is inside a .gguf file
  Digest tokenizer_json{};              // sha256 of tokenizer.json ("" when absent)
  int vocab_size = 0;
  std::vector<uint32_t> eos_token_ids;
};

// tokenizer_sha256: ArtifactHashes::tokenizer (WitnessSeed::tokenizer_sha256).
TokenizerIdentity TokenizerIdentityOf(const ModelFiles& files, const ModelConfig& config,
                                      const Digest& tokenizer_sha256);

// Mismatch naming both models and what differs; Ok when they match.
Status CheckSameTokenizer(const TokenizerIdentity& target, const TokenizerIdentity& draft);

}  // namespace lockstep
