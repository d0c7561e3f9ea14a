// A model's tokenizer — a folder's tokenizer.json (CIS-2 §3.1) or a GGUF
// file's tokenizer.ggml.* metadata (EXTENSIONS.md E2.4) — loaded one way
// for every front end (run, coordinator, serve, reports). Stateless:
// thread-safe.
#pragma once

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

}  // namespace lockstep::runtime
