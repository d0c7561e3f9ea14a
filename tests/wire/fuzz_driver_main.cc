// Standalone driver for hidden_frame_fuzz.cc: seeded random mutation of
// valid frames for a bounded number of iterations or seconds, so the fuzz
// target runs in CI with any compiler (no libFuzzer needed).
//
//   hidden_frame_fuzz_driver [--seed N] [--iterations N] [--seconds S]
//                            [--write-corpus DIR] [FILE...]
// FILE arguments are replayed once each (e.g. crash reproducers).
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "wire/hidden_frame.h"
#include "wire/messages.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

using namespace lockstep;
using namespace lockstep::wire;
using Bytes = std::vector<uint8_t>;

std::vector<float> RandomFloats(size_t n, std::mt19937_64& rng) {
  std::vector<uint32_t> bits(n);
  for (auto& b : bits) b = static_cast<uint32_t>(rng());
  std::vector<float> out(n);
  std::memcpy(out.data(), bits.data(), n * 4);
  return out;
}

std::vector<Bytes> SeedCorpus() {
  std::mt19937_64 rng(7);
  std::vector<Bytes> seeds;
  for (auto [seq, hidden] : {std::pair{1u, 576u}, std::pair{3u, 8u}, std::pair{1u, 1u}}) {
    seeds.push_back(MarshalHidden(
        {11, 2, 5, seq, hidden, 9, RandomFloats(size_t{seq} * hidden, rng), std::nullopt, false,
         {}}));
  }
  seeds.push_back(MarshalLogits({4, 1, 16, RandomFloats(16, rng), {}}));
  Hello hello;
  hello.worker_id = "w0";
  hello.isa = "scalar";
  seeds.push_back(MarshalMessage(hello));
  Assign assign;
  assign.model_dir = "/m";
  assign.layer_hi = 30;
  assign.next_hop = "tcp://127.0.0.1:5555";
  seeds.push_back(MarshalMessage(assign));
  seeds.push_back(MarshalMessage(AssignAck{1, 2, 3}));
  seeds.push_back(MarshalMessage(SessionOpen{1, {WindowSpec::Kind::kPerLayer, 0, {1, 2, 3}}, {}}));
  seeds.push_back(
      MarshalMessage(TokenInput{TokenInput::Phase::kPrefill, 1, 0, 0, {1, 2, 3}, std::nullopt}));
  seeds.push_back(MarshalMessage(Evict{1, 2, 3}));
  seeds.push_back(MarshalMessage(Fork{2, 1, 0}));
  seeds.push_back(MarshalMessage(Release{1}));
  seeds.push_back(MarshalMessage(Heartbeat{1, "coordinator"}));
  seeds.push_back(MarshalMessage(ErrorReport{ErrorKind::kMismatch, "hash", true, 3}));
  seeds.push_back(MarshalMessage(Shutdown{"bye"}));
  // The chain handoff: on a token input, on a hidden frame, and the answer.
  Sha256Stream chain;
  chain.Update(Sha256(std::string_view("seed")));
  const ChainHandoff handoff{3, chain.Export()};
  seeds.push_back(
      MarshalMessage(TokenInput{TokenInput::Phase::kDecode, 1, 4, 9, {7}, handoff}));
  seeds.push_back(MarshalHidden({11, 4, 9, 1, 8, 2, RandomFloats(8, rng), handoff, false, {}}));
  seeds.push_back(MarshalMessage(StepResult{1, 4, 77, Sha256(std::string_view("l")),
                                            chain.Export(), {}, {}}));
  // A multi-row step: its step rows on the way, every row's outcome back.
  TokenInput rows{TokenInput::Phase::kPrefill, 1, 5, 9, {7, 8, 9}, handoff};
  rows.step_rows = 2;
  seeds.push_back(MarshalMessage(rows));
  HiddenFrame hidden_rows{11, 5, 9, 3, 8, 2, RandomFloats(24, rng), handoff, false, {}};
  hidden_rows.step_rows = 2;
  seeds.push_back(MarshalHidden(hidden_rows));
  seeds.push_back(MarshalMessage(StepResult{1, 5, 77, Sha256(std::string_view("l")), chain.Export(),
                                            {}, {{78, Sha256(std::string_view("m")), chain.Export()}}}));
  return seeds;
}

void Mutate(Bytes& b, const std::vector<Bytes>& seeds, std::mt19937_64& rng) {
  static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0xfe};
  const int rounds = 1 + static_cast<int>(rng() % 6);
  for (int r = 0; r < rounds; ++r) {
    const size_t at = b.empty() ? 0 : rng() % b.size();
    switch (rng() % 8) {
      case 0: if (!b.empty()) b[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
      case 1: if (!b.empty()) b[at] = kInteresting[rng() % std::size(kInteresting)]; break;
      case 2:  // overwrite a whole field-sized word
        if (b.size() >= 4) {
          const uint32_t v = static_cast<uint32_t>(rng());
          std::memcpy(&b[rng() % (b.size() - 3)], &v, 4);
        }
        break;
      case 3: b.resize(at); break;  // truncate
      case 4: b.insert(b.begin() + at, static_cast<uint8_t>(rng())); break;
      case 5: if (!b.empty()) b.erase(b.begin() + at); break;
      case 6: b.resize(b.size() + 8 * (1 + rng() % 4), static_cast<uint8_t>(rng())); break;
      case 7: {  // splice the tail of another seed
        const Bytes& other = seeds[rng() % seeds.size()];
        const size_t from = other.empty() ? 0 : rng() % other.size();
        b.resize(at);
        b.insert(b.end(), other.begin() + from, other.end());
        break;
      }
    }
  }
}

// Runs one input from an exactly sized heap block, sometimes misaligned, so
// sanitizers catch any read past either end.
void RunOne(const Bytes& input, bool misalign) {
  const size_t offset = misalign ? 1 : 0;
  auto* block = static_cast<uint8_t*>(std::malloc(input.size() + offset + 1));
  std::memcpy(block + offset, input.data(), input.size());
  LLVMFuzzerTestOneInput(block + offset, input.size());
  std::free(block);
}

bool WriteCorpus(const std::string& dir, const std::vector<Bytes>& seeds) {
  for (size_t i = 0; i < seeds.size(); ++i) {
    std::ofstream out(dir + "/seed-" + std::to_string(i), std::ios::binary);
    out.write(reinterpret_cast<const char*>(seeds[i].data()),
              static_cast<std::streamsize>(seeds[i].size()));
    if (!out) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t seed = 1;
  uint64_t iterations = 100000;
  double seconds = 5.0;
  std::vector<std::string> files;
  const std::vector<Bytes> seeds = SeedCorpus();
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--seed" && has_value) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--iterations" && has_value) iterations = std::strtoull(argv[++i], nullptr, 10);
    else if (arg == "--seconds" && has_value) seconds = std::strtod(argv[++i], nullptr);
    else if (arg == "--write-corpus" && has_value) return WriteCorpus(argv[++i], seeds) ? 0 : 1;
    else files.push_back(arg);
  }
  for (const std::string& path : files) {
    std::ifstream in(path, std::ios::binary);
    RunOne(Bytes(std::istreambuf_iterator<char>(in), {}), false);
  }
  if (!files.empty()) return 0;

  std::mt19937_64 rng(seed);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(seconds);
  for (const Bytes& s : seeds) RunOne(s, false);
  uint64_t done = 0;
  uint64_t accepted = 0;  // shows the mutations reach past the framing checks
  for (; done < iterations && std::chrono::steady_clock::now() < deadline; ++done) {
    Bytes input = seeds[rng() % seeds.size()];
    Mutate(input, seeds, rng);
    RunOne(input, rng() % 4 == 0);
    accepted += ParseMessage(input).ok() ? 1 : 0;
  }
  std::printf("hidden_frame_fuzz_driver: %llu mutated inputs (%llu decoded), seed %llu, "
              "no failures\n",
              static_cast<unsigned long long>(done), static_cast<unsigned long long>(accepted),
              static_cast<unsigned long long>(seed));
  return 0;
}
