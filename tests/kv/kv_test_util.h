// Helpers shared by the KV cache tests: the models they run over (the
// conformance fixtures, Qwen3's q/k norm and Qwen3-MoE's experts among
// them, and seeded synthetic checkpoints covering GQA groups 1, 2, 3,
// biases and untied heads), bit-level comparisons and an
// independent snapshot of a cache. Test-only; not thread-safe.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/kv_cache.h"
#include "engine/local_backend.h"
#include "engine/model_loader.h"
#include "engine/stage.h"
#include "reference.h"

namespace lockstep::kvtest {

struct TestModel {
  std::string name;
  mutable OpenModel open;  // LoadStage records the digests it read here
  std::unique_ptr<Stage> stage;  // every layer, first and last
  RefWeights weights;            // the same checkpoint, read by the reference
  int layers() const { return open.config.num_layers; }
  uint32_t vocab() const { return static_cast<uint32_t>(open.config.vocab_size); }
};

// Every model name the parameterised suites run over.
std::vector<std::string> AllModelNames();

// `name` as a gtest-safe identifier ('-' becomes '_').
std::string TestName(std::string name);

// Loads `name` once per process. Returns nullptr when a conformance
// fixture is absent (callers skip); load errors are test failures.
const TestModel* GetModel(const std::string& name);

// A stage over [lo, hi) of `m`, first iff lo == 0, last iff hi == layers.
std::unique_ptr<Stage> LoadSlice(const TestModel& m, int lo, int hi);

// A deterministic token sequence of length n for `m` (seeded LCG, ids
// spread over the vocabulary).
std::vector<uint32_t> Tokens(const TestModel& m, size_t n, uint32_t seed);

inline uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
bool SameBits(std::span<const float> a, std::span<const float> b);

// Row-major copies [size][kv_width] of a layer's K or V (the tiles
// unpacked through GetK/GetV), and one entry's K row.
std::vector<float> KRows(const KvCache& c, int layer);
std::vector<float> VRows(const KvCache& c, int layer);
std::vector<float> KRow(const KvCache& c, int layer, size_t entry);

// Raw copy of everything a cache holds, made through the row accessors
// only (so it does not rely on Clone or BitEqual).
struct CacheSnapshot {
  std::vector<int64_t> positions;
  std::vector<std::vector<float>> k, kraw, v;  // [layer - lo][entries*kv_width]
  std::vector<int> windows;                    // [layer - lo]
};
CacheSnapshot Snapshot(const KvCache& c);
bool SameSnapshot(const CacheSnapshot& a, const CacheSnapshot& b);

// "" when a and b hold bit-identical K, Kraw, V and positions on layers
// [lo, hi) (both must hold them), else the first difference, named by
// tensor, layer, entry, kv head and lane.
std::string DescribeDiff(const KvCache& a, const KvCache& b, int lo, int hi);
inline std::string DescribeDiff(const KvCache& a, const KvCache& b) {
  return DescribeDiff(a, b, a.lo(), a.hi());
}

// Greedy continuation from `logits`: feeds argmax `steps` times and
// returns each step's logits (the first entry is `logits` itself).
std::vector<std::vector<float>> Greedy(LocalBackend& b, std::vector<float> logits, int steps);

}  // namespace lockstep::kvtest
