// A second, deliberately plain statement of the CIS-2 forward pass (§7-§11,
// with EXTENSIONS.md E3's q/k norm and E4's experts), one token at a time, used as the independent path the KV tests compare
// the engine against. It shares only the pinned scalar primitives with the
// engine (dot_seq, RMSNorm, exp/sin/cos/silu, inv_freq); the weights are
// read here straight from the checkpoint (§2.5 names, §4.1 widening), and
// the projections, the §7.4 rotation, attention — which scores EVERY cached
// entry and masks out-of-window ones with -inf before the §9.3 softmax —
// the MLP (E4: the router's softmax, a top-k by stable sort, the weighted
// sum) and the head are written out here, over its own cache type.
// `config` must outlive the RefModel. Test-only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/io/model_config.h"
#include "engine/io/checkpoint.h"
#include "engine/kv_cache.h"

namespace lockstep::kvtest {

struct RefCache {
  std::vector<int64_t> pos;                    // [entries]
  std::vector<std::vector<float>> k, kraw, v;  // [layer][entries*kv_width]
};

// out = §7.4 rotation of every head_dim-wide head of `in` at position pos,
// with the §7.3 angles computed here from inv_freq.
void RopeRow(const float* in, float* out, size_t width, size_t head_dim, int64_t pos,
             std::span<const float> inv_freq);

// A row-major matrix and an optional bias, as f32.
struct RefLinear {
  size_t rows = 0, cols = 0;
  std::vector<float> w;     // [rows][cols]
  std::vector<float> bias;  // [rows] or empty
};
struct RefExpert {  // E4: one expert's SwiGLU
  RefLinear gate, up, down;
};
struct RefLayer {
  std::vector<float> input_norm, post_norm;  // [hidden]
  std::vector<float> q_norm, k_norm;         // [head_dim] (E3) or empty
  RefLinear q, k, v, o, gate, up, down;      // gate/up/down empty on a MoE layer
  RefLinear router;                          // [experts][hidden] (E4) or empty
  std::vector<RefExpert> experts;            // (E4) or empty
};
struct RefWeights {
  RefLinear embed;  // [vocab][hidden]
  std::vector<RefLayer> layers;
  std::vector<float> final_norm;  // [hidden]
  RefLinear lm_head;              // empty when tied to embed
  const RefLinear& head() const { return lm_head.rows ? lm_head : embed; }
};
Result<RefWeights> LoadRefWeights(const Checkpoint& file, const ModelConfig& config);

class RefModel {
 public:
  RefModel(const ModelConfig& config, const RefWeights& weights);  // both must outlive it

  RefCache Empty() const;
  // Appends `token` at absolute position `pos` to every layer and returns
  // its logits. windows: [layers], 0 = no window, else the query at pos
  // sees only entries with stored position >= pos - W + 1.
  std::vector<float> Step(RefCache& cache, uint32_t token, int64_t pos,
                          std::span<const int> windows) const;
  // Steps `tokens` at first_pos, first_pos+1, ...; returns every logits row.
  std::vector<std::vector<float>> Run(RefCache& cache, std::span<const uint32_t> tokens,
                                      int64_t first_pos, std::span<const int> windows) const;
  std::vector<int> NoWindows() const;
  std::vector<int> Windows(int w) const;

 private:
  void Attend(const RefCache& cache, size_t layer, const float* q, int window, int64_t pos,
              float* out) const;
  void LayerStep(RefCache& cache, size_t layer, int64_t pos, int window,
                 std::vector<float>& h) const;
  std::vector<float> Experts(const RefLayer& lw, const float* x) const;  // E4's y

  const ModelConfig& c_;
  const RefWeights& w_;
  std::vector<float> inv_freq_;
  size_t hd_, kvw_, qw_;
};

// Evicts [from, from+count) the way the KV notes specify, written out
// independently: splice, renumber every survivor to its index, and set
// K = RoPE(Kraw, index) in one rotation.
void RefEvict(RefCache& cache, size_t from, size_t count, size_t head_dim,
              std::span<const float> inv_freq);

// "" if the engine cache holds exactly the reference's entries: same
// positions, and for every (layer, entry, kv head, lane) the float at
// data(layer)[entry*kv_width + kv_head*head_dim + lane] has the reference's
// bits, for K, Kraw and V. Else names the first mismatching slot.
std::string CompareWithRef(const RefCache& ref, const KvCache& cache, size_t head_dim);

}  // namespace lockstep::kvtest
