// Stage: runs one contiguous slice of a transformer (CIS-2 §8-§11, with
// EXTENSIONS.md E3's q/k norm and E4's experts where the config has them) —
// optionally the embedding, the layers [lo, hi), optionally the final norm
// and LM head. A monolithic run is one Stage over every layer; a sharded
// run is one Stage per worker. Same code, same bits.
//
// Every matrix product goes through the kernel table (any ISA gives the
// same bits) over packed weights, split by rows across the optional thread
// pool; several sessions' rows can share one pass over the weights
// (ForwardBatch / LogitsBatch) and each row still equals its solo run.
//
// A Stage is immutable after construction and thread-safe: per-session
// state lives in the KvCache passed to Forward, per-caller buffers in a
// ForwardScratch. `kernels` and `options.pool` must outlive it.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/io/model_config.h"
#include "engine/kv_cache.h"
#include "engine/layer_trace.h"
#include "engine/moe.h"
#include "engine/ops/kernels.h"
#include "engine/ops/thread_pool.h"
#include "engine/weights.h"

namespace lockstep {

struct StageOptions {
  ops::ThreadPool* pool = nullptr;  // null: everything on the calling thread
};

// Buffers of one caller of Forward/ForwardBatch/Logits. They grow (and so
// allocate) only when a call needs more than they hold: make them with
// Stage::NewScratch(max_tokens, max_keys) and a decode step allocates
// nothing. Thread-compatible: one per concurrently calling thread.
class ForwardScratch {
 public:
  ForwardScratch() = default;
  // Forward (not ForwardBatch) calls observer->AfterLayer after each layer;
  // null: none. `observer` must outlive its use here.
  void set_observer(LayerObserver* observer) { observer_ = observer; }

 private:
  friend class Stage;
  struct Row {  // one position being computed
    KvCache* cache;
    size_t entry;  // its cache entry
    int64_t pos;
  };
  std::vector<Row> rows;        // [n]
  std::vector<float> rope;      // [n][head_dim]: cos (first half), sin
  std::vector<float> normed;    // [n][hidden]
  std::vector<float> q;         // [n][heads*head_dim]
  std::vector<float> k;         // [n][kv_width]
  std::vector<float> v;         // [n][kv_width]
  std::vector<float> mixed;     // [n][heads*head_dim], attention heads' outputs
  std::vector<float> attn;      // [n][hidden]
  std::vector<float> gate;      // [n][intermediate]
  std::vector<float> up;        // [n][intermediate]
  std::vector<float> batch;     // [n][hidden], ForwardBatch's gathered rows
  std::vector<float> scores;    // [2*threads*group][key_stride], attention probabilities
  size_t key_stride = 0;        // max_keys rounded up to whole K tiles
  MoeScratch moe;               // E4's buffers (MoE models only)
  LayerObserver* observer_ = nullptr;
};

class Stage {
 public:
  Stage(ModelConfig config, StageWeights weights, const ops::Kernels& kernels);
  Stage(ModelConfig config, StageWeights weights, const ops::Kernels& kernels,
        StageOptions options);

  const StageSpec& spec() const { return weights_.spec; }
  const ModelConfig& config() const { return config_; }
  const std::vector<float>& inv_freq() const { return inv_freq_; }
  size_t hidden() const { return static_cast<size_t>(config_.hidden_size); }
  size_t vocab() const { return static_cast<size_t>(config_.vocab_size); }
  const ops::Kernels& kernels() const { return kernels_; }
  size_t threads() const { return pool_ == nullptr ? 1 : pool_->size(); }
  // The pool this stage computes on (null: the calling thread only), for
  // work that goes with its steps, such as choosing and hashing.
  ops::ThreadPool* pool() const { return pool_; }
  // Weight bytes one decode step streams (see WeightBytesPerToken).
  size_t weight_bytes_per_token() const { return weight_bytes_; }

  // An empty cache for this stage's layers, with the config's windows.
  KvCache NewCache() const;
  // The same with room for `entries` positions, so appending up to that
  // many never allocates.
  KvCache NewCache(size_t entries) const;
  // Scratch sized for calls of up to max_tokens rows over up to max_keys
  // cached positions.
  ForwardScratch NewScratch(size_t max_tokens, size_t max_keys) const;
  // Grows `s` (never shrinks it) to the same capacity, e.g. when a session
  // announces the length it will reach.
  void ReserveScratch(ForwardScratch& s, size_t max_tokens, size_t max_keys) const {
    Reserve(s, max_tokens, max_keys);
  }

  // First stage only: hidden[t] = embed[tokens[t]] (§2.5). Invalid error
  // for an id >= vocab. hidden: resized to [tokens][hidden].
  Status Embed(std::span<const uint32_t> tokens, std::vector<float>* hidden) const;

  // Runs layers [lo, hi) over n = hidden.size()/hidden() positions, which
  // are first_pos .. first_pos+n-1, appending their K/V to `cache`.
  // Invalid if first_pos does not follow the cache's last position.
  Status Forward(std::span<float> hidden, int64_t first_pos, KvCache& cache,
                 ForwardScratch& scratch) const;

  // Several sessions at once: each item is Forward(hidden, first_pos,
  // *cache) and gives the same bits, but the weights are read once for
  // all rows. REQUIRES: distinct caches. On an Invalid item nothing runs.
  struct BatchItem {
    std::span<float> hidden;  // [n_i][hidden]
    int64_t first_pos;
    KvCache* cache;
  };
  Status ForwardBatch(std::span<const BatchItem> items, ForwardScratch& scratch) const;

  // A session step's work on this stage, the one sequence every path runs
  // (LocalBackend::Feed, a worker's StageHost, bench): Forward over the
  // rows, then on the last stage the logits of the last row (§11.1) into
  // `logits` ([vocab]; not touched on other stages).
  Status Step(std::span<float> hidden, int64_t first_pos, KvCache& cache, ForwardScratch& scratch,
              std::span<float> logits) const;

  // Last stage only: logits = head(rmsnorm(row)) (§11.1). logits: [vocab].
  void Logits(std::span<const float> row, std::span<float> logits, ForwardScratch& scratch) const;
  // rows: [n][hidden] -> logits: [n][vocab], one pass over the head.
  void LogitsBatch(std::span<const float> rows, std::span<float> logits,
                   ForwardScratch& scratch) const;

 private:
  struct MatJob {
    const ops::PackedMatrix* w;
    const float* x;  // [n][w->cols()]
    float* y;        // [n][w->rows()]
  };
  void MatMul(std::initializer_list<MatJob> jobs, size_t n) const;
  Status Prepare(std::span<const BatchItem> items, ForwardScratch& s) const;
  void Layer(int layer, float* hidden, size_t n, ForwardScratch& s) const;
  void NormRows(float* hidden, const float* residual, const std::vector<float>& weight, size_t n,
                ForwardScratch& s) const;
  void AddRows(float* hidden, const float* residual, size_t n) const;
  void Attention(int layer, const LayerWeights& w, size_t n, ForwardScratch& s) const;
  void AttendAll(int layer, size_t n, ForwardScratch& s) const;
  void AttendRows(int layer, size_t n, ForwardScratch& s) const;
  void AttendSplit(int layer, size_t n, ForwardScratch& s) const;
  void Mlp(const LayerWeights& w, float* hidden, size_t n, ForwardScratch& s) const;
  void Moe(const LayerWeights& w, float* hidden, size_t n, ForwardScratch& s) const;  // moe.cc
  void Reserve(ForwardScratch& s, size_t n, size_t max_keys) const;

  ModelConfig config_;
  StageWeights weights_;  // linear layers packed (WeightMatrix::packed)
  const ops::Kernels& kernels_;
  ops::ThreadPool* pool_ = nullptr;
  std::vector<float> inv_freq_;  // [head_dim/2], §7.1
  float attn_scale_;             // rsqrt(head_dim), §9.2
  size_t weight_bytes_ = 0;
};

}  // namespace lockstep
