// Kernel microbenchmarks on SmolLM2-135M's shapes, per ISA and weight
// type. Bytes/s counts weight bytes streamed (the decode bound).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "engine/io/sha256_lanes.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/fp_env.h"
#include "engine/ops/packed_matrix.h"
#include "engine/ops/thread_pool.h"

namespace lockstep::ops {
namespace {

std::vector<uint8_t> RandomBf16(size_t n) {
  std::mt19937 rng(1);
  std::vector<uint8_t> b(2 * n);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t v = static_cast<uint16_t>(0x3C00 + rng() % 0x0300) | static_cast<uint16_t>((rng() & 1) << 15);
    b[2 * i] = static_cast<uint8_t>(v & 0xFF);
    b[2 * i + 1] = static_cast<uint8_t>(v >> 8);
  }
  return b;
}

// args: rows, cols, n_tok, bf16 (1) or f32 (0)
void BM_MatmulPacked(benchmark::State& state, const Kernels* k) {
  const size_t rows = static_cast<size_t>(state.range(0)), cols = static_cast<size_t>(state.range(1));
  const size_t n_tok = static_cast<size_t>(state.range(2));
  const WeightType type = state.range(3) ? WeightType::kBf16 : WeightType::kF32;
  const PackedMatrix w = PackedMatrix::FromBf16Bytes(RandomBf16(rows * cols), rows, cols, type);
  std::vector<float> x(n_tok * cols, 0.5f), y(n_tok * rows);
  for (auto _ : state) {
    k->matmul_packed(w, 0, w.panels(), x.data(), n_tok, y.data(), rows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * w.bytes()));
  state.counters["tok/s"] = benchmark::Counter(static_cast<double>(state.iterations() * n_tok),
                                               benchmark::Counter::kIsRate);
}

// args: n_tok, panels per unit; threads = 2. A model-sized weight stream
// (150 matrices of 1536x576 bf16, 265 MB, SmolLM2-135M's 269 MB per token)
// split as Stage::MatMul splits it: units of panels claimed dynamically.
// Shows whether the weight stream overlaps an n_tok-token GEMM.
void BM_MatmulStream(benchmark::State& state, const Kernels* k) {
  const size_t n_tok = static_cast<size_t>(state.range(0)), unit = static_cast<size_t>(state.range(1));
  const size_t rows = 1536, cols = 576, count = 150;
  static std::vector<PackedMatrix>* ws = [] {
    auto* v = new std::vector<PackedMatrix>;
    const std::vector<uint8_t> bytes = RandomBf16(1536 * 576);
    for (size_t i = 0; i < 150; ++i) v->push_back(PackedMatrix::FromBf16Bytes(bytes, 1536, 576, WeightType::kBf16));
    return v;
  }();
  static std::unique_ptr<ThreadPool> pool = std::move(ThreadPool::Create(2).value());
  std::vector<float> x(n_tok * cols, 0.5f), y(n_tok * rows);
  const size_t units = ((*ws)[0].panels() + unit - 1) / unit;
  for (auto _ : state) {
    for (size_t m = 0; m < count; ++m) {
      const PackedMatrix& w = (*ws)[m];
      ForEachChunk(pool.get(), units, 1, [&](size_t b, size_t e, size_t) {
        for (size_t u = b; u < e; ++u) {
          k->matmul_packed(w, u * unit, std::min((u + 1) * unit, w.panels()), x.data(), n_tok, y.data(), rows);
        }
      });
    }
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * count * (*ws)[0].bytes()));
}

// args: n_keys; one kv head of SmolLM2 (head_dim 64) and its 3 query heads.
void BM_Attend(benchmark::State& state, const Kernels* k) {
  const size_t n_keys = static_cast<size_t>(state.range(0)), hd = 64, g = 3;
  const size_t tiles = (n_keys + kKvTile - 1) / kKvTile, ss = tiles * kKvTile;
  std::vector<float> q(g * hd, 0.1f), kt(tiles * kKvTile * hd, 0.2f), v(ss * hd, 0.3f);
  std::vector<float> p(g * ss), out(g * hd);
  for (auto _ : state) {
    k->attend_scores(q.data(), g, kt.data(), 0, tiles, hd, 0.125f, p.data(), ss);
    k->softmax_rows(p.data(), n_keys, g, ss);
    k->attend_mix(p.data(), g, ss, v.data(), 0, n_keys, hd, 0, hd, out.data());
    benchmark::DoNotOptimize(out.data());
  }
}

// args: streams, path (0: each stream alone through Sha256Stream, 1: all
// together through UpdateLanesInKernel); 196 KB each, one SmolLM2-shaped
// step's logits (a step hashes them twice: chain and logits digest).
void BM_Sha256Streams(benchmark::State& state) {
  const size_t n = static_cast<size_t>(state.range(0)), bytes = 49152 * 4;
  if (state.range(1) == 1 && !Sha256LanesKernelRuns()) return state.SkipWithError("no lanes kernel");
  std::vector<std::vector<uint8_t>> data(n, std::vector<uint8_t>(bytes));
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < bytes; ++j) data[i][j] = static_cast<uint8_t>(i * 131 + j * 7);
  }
  for (auto _ : state) {
    std::vector<Sha256Stream> s(n);
    std::vector<Sha256Stream*> streams;
    std::vector<std::span<const uint8_t>> pieces;
    for (size_t i = 0; i < n; ++i) streams.push_back(&s[i]), pieces.push_back(data[i]);
    if (state.range(1) == 1) {
      UpdateLanesInKernel(streams, pieces);
    } else {
      for (size_t i = 0; i < n; ++i) s[i].Update(pieces[i]);
    }
    for (Sha256Stream& x : s) benchmark::DoNotOptimize(x.Finalize());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * n * bytes));
}

void Register() {
  benchmark::RegisterBenchmark("Sha256Streams", BM_Sha256Streams)
      ->ArgsProduct({{1, 2, 4, 6, 8}, {0, 1}});
  for (const std::string& isa : AvailableIsas()) {
    const Kernels* k = KernelsByName(isa);
    auto* m = benchmark::RegisterBenchmark(("MatmulPacked/" + isa).c_str(), BM_MatmulPacked, k);
    for (int bf16 : {0, 1}) {
      m->Args({576, 576, 1, bf16})->Args({1536, 576, 1, bf16})->Args({576, 1536, 1, bf16})
          ->Args({49152, 576, 1, bf16})->Args({49152, 576, 8, bf16});
      if (isa != "scalar") m->Args({1536, 576, 8, bf16})->Args({1536, 576, 128, bf16});
    }
    if (isa != "scalar") {
      benchmark::RegisterBenchmark(("MatmulStream/" + isa).c_str(), BM_MatmulStream, k)
          ->Args({1, 2})->Args({8, 1})->Args({8, 2})->Args({8, 4})->UseRealTime();
    }
    benchmark::RegisterBenchmark(("Attend/" + isa).c_str(), BM_Attend, k)->Arg(16)->Arg(132)->Arg(512)->Arg(2048);
  }
}

}  // namespace
}  // namespace lockstep::ops

int main(int argc, char** argv) {
  if (!lockstep::ops::PinFpEnvironment().ok()) return 1;
  lockstep::ops::Register();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
