// Tokenizer benchmarks: loading the SmolLM2 tokenizer.json, encoding English
// text (bytes/s), decoding, and building the synthetic tokenizer.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <benchmark/benchmark.h>

#include "engine/tokenizer/synthetic_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace lockstep {
namespace {

const std::string& SmolPath() {
  static const std::string p =
      std::string(LOCKSTEP_SHARED_DIR) + "/fixtures/smollm2-135m/tokenizer.json";
  return p;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// ~`bytes` of varied English prose with punctuation, digits and newlines.
std::string EnglishText(size_t bytes) {
  static const char* kWords[] = {
      "the", "of", "and", "to", "in", "a", "is", "that", "for", "it", "as", "was", "with",
      "be", "by", "on", "not", "he", "I", "this", "are", "or", "his", "from", "at",
      "which", "but", "have", "an", "had", "they", "you", "were", "their", "one", "all",
      "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would",
      "who", "so", "no", "tokenizer", "deterministic", "inference", "language", "model",
      "Once", "upon", "time", "little", "forest", "morning", "grandmother", "don't",
      "it's", "2024", "3.14159", "GPU", "well-known", "naïve", "café"};
  std::string text;
  uint64_t state = 12345;
  while (text.size() < bytes) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const size_t n = sizeof(kWords) / sizeof(kWords[0]);
    text += kWords[(state >> 33) % n];
    const uint64_t r = (state >> 20) % 23;
    text += r == 0 ? ".\n" : r == 1 ? ", " : r == 2 ? "! " : " ";
  }
  text.resize(bytes);
  return text;
}

const Tokenizer* LoadedSmol() {
  static const Tokenizer* t = []() -> const Tokenizer* {
    auto r = Tokenizer::FromFile(SmolPath());
    return r.ok() ? new Tokenizer(std::move(r).value()) : nullptr;
  }();
  return t;
}

void BM_LoadSmolLM2(benchmark::State& state) {
  if (!std::filesystem::exists(SmolPath())) {
    state.SkipWithError("fixture absent");
    return;
  }
  const std::string json = ReadAll(SmolPath());
  for (auto _ : state) {
    auto t = Tokenizer::FromJson(json, SmolPath());
    if (!t.ok()) state.SkipWithError(t.status().ToString().c_str());
    benchmark::DoNotOptimize(t);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * json.size()));
}
BENCHMARK(BM_LoadSmolLM2)->Unit(benchmark::kMillisecond);

void BM_EncodeEnglish(benchmark::State& state) {
  const Tokenizer* tok = LoadedSmol();
  if (tok == nullptr) {
    state.SkipWithError("fixture absent");
    return;
  }
  const std::string text = EnglishText(static_cast<size_t>(state.range(0)));
  size_t tokens = 0;
  for (auto _ : state) {
    auto ids = tok->Encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
  state.counters["tokens"] = static_cast<double>(tokens);
}
BENCHMARK(BM_EncodeEnglish)->Arg(1 << 10)->Arg(1 << 20)->Unit(benchmark::kMillisecond);

void BM_DecodeEnglish(benchmark::State& state) {
  const Tokenizer* tok = LoadedSmol();
  if (tok == nullptr) {
    state.SkipWithError("fixture absent");
    return;
  }
  const std::string text = EnglishText(1 << 20);
  const auto ids = tok->Encode(text);
  for (auto _ : state) benchmark::DoNotOptimize(tok->Decode(ids));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}
BENCHMARK(BM_DecodeEnglish)->Unit(benchmark::kMillisecond);

void BM_SyntheticTokenizer(benchmark::State& state) {
  for (auto _ : state) {
    auto json = SyntheticTokenizerJson(static_cast<uint32_t>(state.range(0)), 7);
    benchmark::DoNotOptimize(json);
  }
}
BENCHMARK(BM_SyntheticTokenizer)->Arg(512)->Arg(4096)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace lockstep

BENCHMARK_MAIN();
