// Stage: runs one contiguous slice of a transformer (CIS-2 §8-§11) —
// optionally the embedding, the layers [lo, hi), optionally the final norm
// and LM head. A monolithic run is one Stage over every layer; a sharded
// run is one Stage per worker. Same code, same bits.
//
// A Stage is immutable after construction and thread-safe: per-session
// state lives in the KvCache passed to Forward. `kernels` must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/io/model_config.h"
#include "engine/kv_cache.h"
#include "engine/ops/kernels.h"
#include "engine/weights.h"

namespace lockstep {

class Stage {
 public:
  Stage(ModelConfig config, StageWeights weights, const ops::Kernels& kernels);

  const StageSpec& spec() const { return weights_.spec; }
  const ModelConfig& config() const { return config_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  size_t hidden() const { return static_cast<size_t>(config_.hidden_size); }
  size_t vocab() const { return static_cast<size_t>(config_.vocab_size); }

  // An empty cache for this stage's layers, with the config's windows.
  KvCache NewCache() const;

  // First stage only: hidden[t] = embed[tokens[t]] (§2.5). Invalid error
  // for an id >= vocab. hidden: resized to [tokens][hidden].
  Status Embed(std::span<const uint32_t> tokens, std::vector<float>* hidden) const;

  // Runs layers [lo, hi) over n = hidden.size()/hidden() positions, which
  // are first_pos .. first_pos+n-1, appending their K/V to `cache`.
  // Invalid if first_pos does not follow the cache's last position.
  Status Forward(std::span<float> hidden, int64_t first_pos, KvCache& cache) const;

  // Last stage only: logits = head(rmsnorm(row)) (§11.1). logits: [vocab].
  void Logits(std::span<const float> row, std::span<float> logits) const;

 private:
  void Layer(int layer, std::span<float> hidden, size_t n, size_t first_entry,
             KvCache& cache) const;
  void Attention(int layer, const LayerWeights& w, std::span<const float> normed, size_t n,
                 size_t first_entry, KvCache& cache, std::span<float> attn_out) const;
  void Mlp(const LayerWeights& w, std::span<float> hidden, size_t n) const;

  ModelConfig config_;
  StageWeights weights_;
  const ops::Kernels& kernels_;
  std::vector<float> inv_freq_;  // [head_dim/2], §7.1
  float attn_scale_;             // rsqrt(head_dim), §9.2
};

}  // namespace lockstep
