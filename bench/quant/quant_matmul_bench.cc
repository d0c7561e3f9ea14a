// matmul_packed for one token (decode) at every weight type over
// SmolLM2-135M's matrix shapes. Name: QuantMatmul/<isa>/<type>/rows/cols/
// threads/mode, mode 0 = one matrix read again and again (it stays in the
// caches: the arithmetic bound), 1 = as many copies as fill 512 MB, read
// in turn (each one comes from DRAM). Counters: bytes/s of resident
// weights, weights/s (rows * cols per matmul). K types need whole 256-
// element blocks per row, so their 576-column shapes run at 512 columns.
// Threads split each matrix in units of 2 panels, in one run per thread,
// as the stage splits a decode matmul (engine/matmul_units.h). PackRows/<type>: how fast GGUF rows
// are packed (bytes/s of file bytes), one thread.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/matmul_units.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/fp_env.h"
#include "engine/ops/packed_matrix.h"
#include "engine/ops/quant_blocks.h"
#include "engine/ops/thread_pool.h"

namespace lockstep::ops {
namespace {

constexpr WeightType kTypes[] = {WeightType::kF32,  WeightType::kBf16, WeightType::kF16,
                                 WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_K,
                                 WeightType::kQ5_K, WeightType::kQ6_K};
constexpr size_t kStreamBytes = size_t{512} << 20;

// Valid rows of `type`: random quants, f16 scales and values of ordinary
// size (weights around 2^-6..1, as in a trained model).
std::vector<uint8_t> RandomRows(WeightType type, size_t rows, size_t cols) {
  const GgmlType g = GgmlTypeOf(type);
  const GgmlBlock& b = BlockOf(g);
  std::mt19937 rng(static_cast<uint32_t>(rows * 31 + cols));
  std::vector<uint8_t> bytes(rows * cols / b.elems * b.bytes);
  for (uint8_t& x : bytes) x = static_cast<uint8_t>(rng());
  auto half = [&](uint8_t* p) {
    const uint16_t h = static_cast<uint16_t>(0x1C00 + rng() % 0x0800);  // 2^-8 .. 2^-6
    p[0] = static_cast<uint8_t>(h & 0xFF);
    p[1] = static_cast<uint8_t>(h >> 8);
  };
  for (size_t i = 0; i < bytes.size(); i += b.bytes) {
    uint8_t* p = bytes.data() + i;
    switch (g) {
      case GgmlType::kQ6_K: half(p + 208); break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K: half(p + 2); [[fallthrough]];
      case GgmlType::kQ8_0:
      case GgmlType::kQ4_0: half(p); break;
      case GgmlType::kF16: half(p); break;
      case GgmlType::kBF16: p[1] = static_cast<uint8_t>(0x3C + (p[1] & 1)); break;
      case GgmlType::kF32: p[3] = static_cast<uint8_t>(0x3C + (p[3] & 1)); break;
    }
  }
  return bytes;
}

// args: type index, rows, cols, threads, mode (header comment).
void BM_QuantMatmul(benchmark::State& state, const Kernels* k) {
  const WeightType type = kTypes[state.range(0)];
  const size_t rows = static_cast<size_t>(state.range(1)), cols = static_cast<size_t>(state.range(2));
  const size_t threads = static_cast<size_t>(state.range(3));
  const std::vector<uint8_t> file = RandomRows(type, rows, cols);
  std::vector<PackedMatrix> ws;
  do {
    ws.push_back(PackedMatrix::Allocated(rows, cols, type));
    ws.back().PackRows(0, file);
  } while (state.range(4) == 1 && ws.size() * ws[0].bytes() < kStreamBytes);
  auto pool = std::move(ThreadPool::Create(threads).value());
  std::vector<float> x(cols, 0.5f), y(rows);
  const size_t units = lockstep::Units(ws[0]);
  size_t next = 0;
  for (auto _ : state) {
    const PackedMatrix& w = ws[next];
    next = next + 1 == ws.size() ? 0 : next + 1;
    lockstep::ForEachUnit(pool.get(), units, [&](size_t u) {
      k->matmul_packed(w, lockstep::UnitBegin(u), lockstep::UnitEnd(w, u), x.data(), 1, y.data(), rows);
    });
    benchmark::DoNotOptimize(y.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * ws[0].bytes()));
  state.counters["weights/s"] = benchmark::Counter(static_cast<double>(state.iterations() * rows * cols),
                                                   benchmark::Counter::kIsRate);
}

// args: type index; one thread packs a 49152-row matrix from its GGUF rows
// (the LM head / embedding of SmolLM2), bytes/s of GGUF input.
void BM_PackRows(benchmark::State& state) {
  const WeightType type = kTypes[state.range(0)];
  const size_t rows = 49152, cols = BlockOf(GgmlTypeOf(type)).elems == 256 ? 512 : 576;
  const std::vector<uint8_t> file = RandomRows(type, rows, cols);
  PackedMatrix w = PackedMatrix::Allocated(rows, cols, type);
  for (auto _ : state) {
    w.PackRows(0, file);
    benchmark::DoNotOptimize(w.panel(0));
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * file.size()));
}

void Register() {
  for (size_t t = 0; t < std::size(kTypes); ++t) {
    const std::string name = std::string("PackRows/") + BlockOf(GgmlTypeOf(kTypes[t])).name;
    benchmark::RegisterBenchmark(name.c_str(), BM_PackRows)->Arg(static_cast<int64_t>(t));
  }
  for (const std::string& isa : AvailableIsas()) {
    if (isa == "scalar") continue;
    const Kernels* k = KernelsByName(isa);
    for (size_t t = 0; t < std::size(kTypes); ++t) {
      const std::string name = std::string("QuantMatmul/") + isa + "/" + BlockOf(GgmlTypeOf(kTypes[t])).name;
      auto* b = benchmark::RegisterBenchmark(name.c_str(), BM_QuantMatmul, k)->UseRealTime();
      const int64_t c576 = BlockOf(GgmlTypeOf(kTypes[t])).elems == 256 ? 512 : 576;
      for (int64_t mode : {0, 1}) {
        for (int64_t threads : {1, 2}) {
          for (auto [rows, cols] :
               {std::pair<int64_t, int64_t>{576, c576}, {1536, c576}, {576, 1536}, {49152, c576}}) {
            b->Args({static_cast<int64_t>(t), rows, cols, threads, mode});
          }
        }
      }
    }
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
