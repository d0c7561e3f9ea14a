// The tensors of a GGUF checkpoint under their CIS-2 §2.5 names
// (EXTENSIONS.md E2.2's table): which GGUF tensor names exist, and the
// §2.5 tensors a file presents — a stacked expert tensor [in, out, E] as E
// matrices, llama-arch q/k rows marked for the un-permute. Stateless:
// thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/io/gguf.h"
#include "engine/io/model_config.h"

namespace lockstep {

// The name GGUF keeps for llama.cpp's Llama-3 rope scaling factors (E2.2);
// a Checkpoint presents it under this name too.
inline constexpr const char* kGgufRopeFreqs = "rope_freqs.weight";

// Whether `name` is one of E2.2's tensor names (a layer index written in
// decimal without leading zeros).
bool IsGgufTensorName(std::string_view name);

// The GGUF name of a §2.5 tensor ("model.layers.3.self_attn.q_proj.weight"
// -> "blk.3.attn_q.weight"); nullopt for a name E2.2 does not list (and for
// an expert's matrix, which GGUF stacks).
std::optional<std::string> GgufNameOf(std::string_view hf_name);

// The layer of a "blk.{i}." name; nullopt for a global tensor.
std::optional<int> GgufLayerOf(std::string_view name);

// One §2.5 tensor of a GGUF file: where its bytes are (TensorInfo, with
// the §2.5 name and shape) and the GGUF tensor holding them.
struct HfTensor {
  TensorInfo info;
  std::string gguf_name;
};

// Every tensor of `file` under its §2.5 name, for a file whose config is
// `config` (ModelConfigFromGguf): shapes reversed from ne, expert stacks
// split, llama-arch q/k (weights and biases) marked with the head count of
// their un-permute. Invalid naming the file and tensor for a layer index
// past block_count, a stack whose shape is not [in, out, E], or q/k rows
// that do not split into heads of even size.
Result<std::vector<HfTensor>> HfTensorsOf(const GgufFile& file, const ModelConfig& config);

}  // namespace lockstep
