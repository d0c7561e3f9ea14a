// Reads sampling cases from stdin, one per line:
//   seed step temperature_bits top_k top_p_bits n logit_bits[0..n)
// (integers decimal, *_bits hexadecimal f32 bit patterns) and prints the
// token ChooseToken picks, one per line. Driven by reference.py.
#include <bit>
#include <cstdint>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/ops/fp_env.h"
#include "engine/sampling.h"

int main() {
  if (!lockstep::ops::PinFpEnvironment().ok()) {
    std::cerr << "sampling_probe: cannot pin FTZ/DAZ\n";
    return 2;
  }
  lockstep::SamplingScratch scratch;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream in(line);
    lockstep::SamplingParams p;
    uint32_t step = 0, t_bits = 0, p_bits = 0;
    size_t n = 0;
    in >> p.seed >> step >> std::hex >> t_bits >> std::dec >> p.top_k >> std::hex >> p_bits >>
        std::dec >> n;
    p.temperature = std::bit_cast<float>(t_bits);
    p.top_p = std::bit_cast<float>(p_bits);
    std::vector<float> logits(n);
    for (size_t i = 0; i < n; ++i) {
      uint32_t b = 0;
      in >> std::hex >> b;
      logits[i] = std::bit_cast<float>(b);
    }
    if (!in || n == 0 || !lockstep::ValidateSamplingParams(p).ok()) {
      std::cerr << "sampling_probe: bad case: " << line << "\n";
      return 2;
    }
    std::cout << lockstep::ChooseToken(logits, p, step, &scratch) << "\n";
  }
  return 0;
}
