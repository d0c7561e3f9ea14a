// A byte-level BPE tokenizer given as lists — a GGUF file's tokenizer.ggml.*
// metadata (EXTENSIONS.md E2.4) — built as the tokenizer.json it is
// equivalent to, so it encodes exactly as Tokenizer does for that file
// (CIS-2 §3.1):
//  - token i is tokens[i], a vocabulary entry unless token_types[i] is 5
//    (UNUSED); types 3 (CONTROL) and 4 (USER_DEFINED) are also added
//    tokens (normalized false, no lstrip/rstrip/single_word, special = type
//    3), split out of the raw text before pre-tokenization;
//  - merge rank r is merges[r] = "A B", A, B and AB vocabulary entries;
//  - no normalizer, no unk token, ByteLevel decoding;
//  - `pre` selects the pre-tokenizer (smollm, gpt-2, llama-bpe = llama3 =
//    llama-v3, qwen2 = deepseek-r1-qwen); any other name, "default" and ""
//    are refused (Unimplemented), as they have no tokenizer.json form.
// Stateless: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/tokenizer/tokenizer.h"

namespace lockstep {

struct BpeVocabulary {
  std::vector<std::string> tokens;   // id -> byte-level token text
  std::vector<int32_t> token_types;  // [tokens.size()], or empty: every token type 1
  std::vector<std::string> merges;   // rank -> "A B"
  std::string pre;                   // tokenizer.ggml.pre
};

// Errors name `source` and the field (tokenizer.ggml.merges[r], ...).
Result<Tokenizer> TokenizerFromVocabulary(const BpeVocabulary& v, const std::string& source);

}  // namespace lockstep
