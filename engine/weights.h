// Weights of one pipeline stage: the layers [lo, hi) of a model, plus the
// embedding table when the stage is first (or when it is last and the head
// is tied), plus the final norm and LM head when it is last.
//
// Loaded from a Checkpoint (one safetensors file or several, or a GGUF
// file); only the
// tensors the stage needs are kept, piece by piece straight into their
// packed layout (F16 and F32 too), so resident memory is the stage's share
// of the model and never a second copy of it. Every needed tensor's presence, shape and
// dtype is checked before anything is allocated, and a file truncated or
// rewritten while loading is an error naming it.
// Linear layers are stored in the kernels' panel layout (PackedMatrix),
// by default keeping BF16 checkpoints' bits and widening them in registers
// by the exact §4.1 shift — the same f32 values widen-at-load (§4.2) gives,
// so every result is bit-identical, at half the bytes; F16 and GGUF block
// types likewise stay at their own size and are dequantized in registers to
// E2.3's values. Norms and biases are widened (or dequantized) at load. Immutable after load; thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/io/model_config.h"
#include "engine/io/checkpoint.h"
#include "engine/ops/packed_matrix.h"
#include "engine/stage_tensors.h"

namespace lockstep {

// A linear layer's [rows][cols] weight (§2.5): row-major f32 `data`
// (WeightFormat::kF32Rows) and/or the kernels' `packed` layout. Stage packs
// `data` when `packed` is empty.
struct WeightMatrix {
  size_t rows = 0;
  size_t cols = 0;
  std::vector<float> data;   // [rows][cols], or empty when only packed
  ops::PackedMatrix packed;  // [panels][cols][kPanelRows], or empty
  const float* row(size_t r) const { return data.data() + r * cols; }  // REQUIRES data
};

// How LoadStageWeights stores linear layers.
enum class WeightFormat {
  kF32Rows,     // widened at load, row-major `data` (the plain §4.2 reading)
  kPackedF32,   // widened at load, `packed`
  kPackedBf16,  // `packed`, each weight at its own type: BF16 bits, F16 halves, GGUF
                // blocks (F32 checkpoints: as kPackedF32)
};

// One expert of a MoE layer (E4): a §10 SwiGLU MLP of its own.
struct ExpertWeights {
  WeightMatrix gate_proj;  // [moe_inter][hidden]
  WeightMatrix up_proj;    // [moe_inter][hidden]
  WeightMatrix down_proj;  // [hidden][moe_inter]
};

struct LayerWeights {
  std::vector<float> input_norm;  // [hidden]
  WeightMatrix q_proj;            // [heads*head_dim][hidden]
  WeightMatrix k_proj;            // [kv_heads*head_dim][hidden]
  WeightMatrix v_proj;            // [kv_heads*head_dim][hidden]
  std::vector<float> q_bias;      // [heads*head_dim] or empty (§9.1)
  std::vector<float> k_bias;      // [kv_heads*head_dim] or empty
  std::vector<float> v_bias;      // [kv_heads*head_dim] or empty
  std::vector<float> q_norm;      // [head_dim] (E3) or empty
  std::vector<float> k_norm;      // [head_dim] (E3) or empty
  WeightMatrix o_proj;            // [hidden][heads*head_dim]
  std::vector<float> post_norm;   // [hidden]
  WeightMatrix gate_proj;         // [inter][hidden]; empty on a MoE layer
  WeightMatrix up_proj;           // [inter][hidden]; empty on a MoE layer
  WeightMatrix down_proj;         // [hidden][inter]; empty on a MoE layer
  WeightMatrix router;            // [experts][hidden], mlp.gate.weight (E4) or empty
  std::vector<ExpertWeights> experts;  // [experts] (E4) or empty
};

// fn(m) for every linear layer of `l`: attention's, then the dense MLP's
// or the router's and every expert's (ascending index).
void ForEachMatrix(LayerWeights& l, const std::function<void(WeightMatrix&)>& fn);

struct StageWeights {
  StageSpec spec;
  int experts_per_tok = 0;          // E4's k on MoE layers (0: dense)
  WeightMatrix embed;               // [vocab][hidden]; empty unless needed
  std::vector<LayerWeights> layers; // [hi - lo]
  std::vector<float> final_norm;    // [hidden] when last
  WeightMatrix lm_head;             // [vocab][hidden] when last and untied
  // The LM head matrix (§11.1): lm_head if untied, else the embedding.
  const WeightMatrix& head() const { return lm_head.rows ? lm_head : embed; }
};

// A weight cache for LoadStageWeights (weight_cache.h): the directory
// holding cache files (empty: none), and, after the load, one line saying
// what the load did with it (read and verified, written, or why not).
struct WeightCacheUse {
  std::string dir;
  std::string note;
};

// Reads the stage's tensors in the one pass of Checkpoint::ReadAll on
// `threads` threads (same result for any count), which also hashes every
// file the checkpoint opened: `digests`, when given, receives them. A
// caller verifies them before using the weights (model_loader.h does).
// With a cache directory (WeightFormat::kPackedBf16 only: matrices at
// their own type, GGUF block types included), matrices the cache file
// holds are read from it into owned memory and each one compared with the
// checkpoint's bytes as they are hashed; if any differs, or the file is
// missing, malformed or lacks one, the stage is loaded afresh and the file
// rewritten. The result is the same bits either way.
// REQUIRES: spec validated against cfg (0 <= lo <= hi <= num_layers).
// The three-argument form loads WeightFormat::kPackedBf16 on one thread.
Result<StageWeights> LoadStageWeights(const Checkpoint& file, const ModelConfig& cfg,
                                      const StageSpec& spec);
Result<StageWeights> LoadStageWeights(const Checkpoint& file, const ModelConfig& cfg,
                                      const StageSpec& spec, WeightFormat format,
                                      int threads = 1,
                                      std::vector<FileDigest>* digests = nullptr,
                                      WeightCacheUse* cache = nullptr);

// Bytes of linear-layer weights one decode step streams (every matrix
// once; on a MoE layer the router and the k largest experts, as a token
// reads only the k it chooses; the embedding lookup excluded unless it is
// the tied LM head).
size_t WeightBytesPerToken(const StageWeights& w);

// Checks a spec against a config; Invalid error naming the bad field.
Status ValidateStageSpec(const ModelConfig& cfg, const StageSpec& spec);

}  // namespace lockstep
