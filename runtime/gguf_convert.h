// A safetensors model folder written as one GGUF file the way llama.cpp's
// convert_hf_to_gguf.py writes it (docs/gguf.md, "Converting"): E2.2's
// tensor names, llama-arch q/k rows (and biases) permuted, 1-D tensors as
// F32, Llama-3 rope scaling as rope_freqs.weight, the config as E2.2's
// keys, and the tokenizer as E2.4's tokenizer.ggml.* keys with the chat
// template of tokenizer_config.json. Only exact conversions are made: a
// matrix's type must hold every value of its source (BF16 from BF16, F16
// from F16, F32 from any), so a BF16 folder converted to BF16 computes
// exactly what the folder does (E2.2) while its artifact hashes name the
// .gguf file (E2.5). Stateless: thread-safe for distinct outputs.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "engine/io/dtype.h"
#include "engine/io/gguf.h"

namespace lockstep::runtime {

// Writes `out_path` from the folder `dir` (model_type llama or qwen2), its
// matrices as `matrices` (F32, F16 or BF16). Errors name the file, tensor
// or key: Unimplemented for another architecture, a tensor E2.2 does not
// name, or a tokenizer.json no E2.4 pre-tokenizer equals; Invalid for an
// inexact conversion.
Status ConvertToGguf(const std::string& dir, const std::string& out_path, DType matrices);

// The tokenizer.ggml.* keys (E2.4) equivalent to a tokenizer.json, for a
// model of `vocab_size` ids (ids no token has become "[PAD<i>]", type 5):
// model "gpt2", pre from the pre-tokenizer (Digits + ByteLevel: smollm;
// ByteLevel: gpt-2; Llama-3's or Qwen2's Split + ByteLevel: llama-bpe,
// qwen2), tokens, token_type (added special tokens 3, other added tokens
// 4, the rest 1), merges. Unimplemented naming `source` for a tokenizer
// E2.4 cannot express.
Result<std::vector<std::pair<std::string, GgufValue>>> GgufTokenizerKeys(
    std::string_view tokenizer_json, const std::string& source, uint32_t vocab_size);

}  // namespace lockstep::runtime
