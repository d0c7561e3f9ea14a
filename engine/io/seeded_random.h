// The seeded streams synthetic checkpoints draw from (synthetic_model.h,
// synthetic_gguf.h): each tensor's own SplitMix64 stream, state = seed ^
// FNV-1a-64(tensor name), so a tensor's values depend only on the seed and
// its name. Same seed -> same values on every host. Plain values; a stream
// is not shared between threads.
#pragma once

#include <cstdint>
#include <string_view>

namespace lockstep {

inline uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001B3ull;
  }
  return h;
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  // The stream of tensor `name` under `seed`.
  SplitMix64(std::string_view name, uint64_t seed) : state_(seed ^ Fnv1a64(name)) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

 private:
  uint64_t state_;
};

// Element by element, the values synthetic_model.h describes: each 64-bit
// output gives two, low 32 bits first; a value takes the top 24 bits r of
// its half, u = (r + 0.5) / 2^23 - 1 in (-1, 1), then center + amplitude *
// u in f64, rounded once to f32.
class SyntheticValues {
 public:
  SyntheticValues(std::string_view name, uint64_t seed, double center, double amplitude)
      : rng_(name, seed), center_(center), amplitude_(amplitude) {}
  float Next() {
    if (!pending_) {
      word_ = rng_.Next();
      pending_ = true;
      return Value(static_cast<uint32_t>(word_));
    }
    pending_ = false;
    return Value(static_cast<uint32_t>(word_ >> 32));
  }

 private:
  float Value(uint32_t half) const {
    const double u = (static_cast<double>(half >> 8) + 0.5) / 8388608.0 - 1.0;
    return static_cast<float>(center_ + amplitude_ * u);
  }

  SplitMix64 rng_;
  double center_, amplitude_;
  uint64_t word_ = 0;
  bool pending_ = false;
};

}  // namespace lockstep
