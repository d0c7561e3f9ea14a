// The sparse mixture-of-experts block of a Qwen3-MoE layer (EXTENSIONS.md
// E4), replacing §10 for each position independently:
//   logits[e] = dot_seq(router[e], x)        (§5.2, the kernel table)
//   p = softmax_seq(logits)                    (§9.3)
//   the k largest p by strict >, ties to the lower index, in ascending index
//   w = p, or p / (sum of the k p in ascending index) with norm_topk_prob
//   y = +0; y += w[e] * SwiGLU_e(x) per chosen e, ascending (mul, then add)
//   h = h + y                                  (§5.4)
//
// Stage::Moe (moe.cc) runs it over a step's rows: every row is routed on
// its own, then the rows are grouped by expert so each chosen expert's
// weights are read once for all the rows that chose it (and no other
// expert's are read at all); each row's result equals its solo run bit for
// bit. Threads split routing and combining by rows and the experts'
// products by panels, never one sum.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/io/model_config.h"

namespace lockstep {

// E4's choice for one position from its router probabilities `p`
// (softmax_seq of the logits, §9.3): `chosen` receives the k experts in
// ascending index, `weight` their weights. `taken` is scratch of
// `experts` bytes. REQUIRES: 1 <= k <= experts.
void ChooseExperts(const float* p, size_t experts, size_t k, bool norm_topk_prob, uint8_t* taken,
                   uint32_t* chosen, float* weight);

// Per-caller buffers of Stage::Moe, grown by Reserve (a reserved step
// allocates nothing). Thread-compatible.
struct MoeScratch {
  std::vector<float> probs;       // [n][experts]: router logits, then probabilities
  std::vector<uint8_t> taken;     // [n][experts]: ChooseExperts' scratch
  std::vector<uint32_t> chosen;   // [n][k]: each row's experts, ascending
  std::vector<float> weight;      // [n][k]: their weights
  std::vector<uint32_t> slot;     // [n][k]: the gathered row of each choice
  std::vector<uint32_t> first;    // [experts + 1]: expert e's gathered rows are
                                  // [first[e], first[e + 1])
  std::vector<uint32_t> next;     // [experts]: grouping's cursor
  std::vector<uint32_t> active;   // experts chosen by some row, ascending
  std::vector<size_t> unit_end;   // [active]: cumulative work items of a pass over them
  std::vector<float> x;           // [n*k][hidden]: rows gathered by expert, ascending
  std::vector<float> gate;        // [n*k][moe_inter]: gate, then silu(gate) * up
  std::vector<float> up;          // [n*k][moe_inter]
  std::vector<float> out;         // [n*k][hidden]: each expert's output for its rows
  std::vector<float> y;           // [n][hidden]: the block's output (E4's y)

  // Room for steps of up to n rows. A dense config reserves nothing.
  void Reserve(size_t n, const ModelConfig& c);
};

}  // namespace lockstep
