// Reads a HF tokenizer.json into a TokenizerDoc: the small configuration
// parts as a JSON tree, and the two big tables (model.vocab, model.merges)
// as flat vectors, read with a streaming parser so loading stays fast.
// As strict as base/json.h: nesting at most kMaxJsonDepth deep, no object
// repeating a key.
// Pure function; thread-safe. Never throws.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace lockstep {

struct TokenizerDoc {
  // The whole document except model.vocab and model.merges.
  nlohmann::json root;
  // model.vocab in file order: (token, id). Ids are checked to fit u32.
  std::vector<std::pair<std::string, uint32_t>> vocab;
  bool has_vocab = false;
  // model.merges in file order (list position = rank), from either
  // "a b" strings or ["a", "b"] pairs.
  std::vector<std::pair<std::string, std::string>> merges;
  bool has_merges = false;
};

// Errors name `source_name` and the offending field.
Result<TokenizerDoc> ParseTokenizerJson(std::string_view json,
                                        const std::string& source_name);

}  // namespace lockstep
