// What a model says about text: its tokenizer — a folder's tokenizer.json
// (CIS-2 §3.1) or a GGUF file's tokenizer.ggml.* metadata (EXTENSIONS.md
// E2.4) — and its end-of-sequence ids. One way to load them for every
// front end (run, coordinator, serve, reports). Stateless: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.h"
#include "engine/io/gguf.h"
#include "engine/io/model_files.h"
#include "engine/tokenizer/tokenizer.h"

namespace lockstep::runtime {

// NotFound when the folder has no tokenizer.json or the GGUF file no
// tokenizer.ggml.tokens; Unimplemented when the GGUF tokenizer is not one
// that encodes text (tokenizer.ggml.model other than "gpt2", a `pre`
// E2.4 does not define: then only token ids can be given). Errors name the
// file and the key.
Result<Tokenizer> LoadModelTokenizer(const ModelFiles& files);
// The same from a GGUF file already open.
Result<Tokenizer> TokenizerFromGguf(const GgufFile& file);

// config.json's eos_token_id (an id or a list), or a GGUF file's
// tokenizer.ggml.eos_token_id; empty when absent or unreadable (then only
// max_tokens ends a generation).
std::vector<uint32_t> ModelEosIds(const ModelFiles& files);

}  // namespace lockstep::runtime
