// Shared by the teacher-forcing and speculative tests: the decode requests
// every kind of receipt the tests produce (greedy, sampled, windowed,
// evictions, long enough to cross LocalBackend's row passes, traced), the
// backends that run them, and the exact comparison of two results
// (runtime::CompareResults, as everywhere).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/decode.h"
#include "engine/local_backend.h"
#include "engine/speculative.h"
#include "runtime/compare.h"

namespace lockstep::testing {

struct DecodeCase {
  std::string name;
  DecodeRequest req;
  int window = 0;
  bool trace = false;
};

inline std::vector<DecodeCase> DecodeCases() {
  auto req = [](std::vector<uint32_t> prompt, uint32_t gen) {
    DecodeRequest r;
    r.prompt = std::move(prompt);
    r.gen = gen;
    return r;
  };
  std::vector<uint32_t> repeat;  // a prompt that repeats a phrase
  for (int i = 0; i < 6; ++i) repeat.insert(repeat.end(), {17, 4, 99, 250, 3});
  std::vector<uint32_t> long_prompt;  // more rows than one pass holds (engine/row_passes.h)
  for (uint32_t i = 0; i < kRowsPerPass + 6; ++i) long_prompt.push_back((i * 29 + 7) % 300);
  std::vector<DecodeCase> cases = {
      {"greedy", req({3, 1, 4, 1, 5}, 12)},
      {"repeating", req(repeat, 40)},
      {"long", req(long_prompt, 70)},
      {"window", req(repeat, 30), 6},
      {"evictions", req({9, 8, 7, 6, 5, 4}, 24)},
      {"traced", req({2, 7, 1, 8}, 10), 0, true},
      {"traced_evictions", req(repeat, 20), 5, true},
      {"sampled", req(repeat, 30)},
      {"sampled_topk_evictions", req({5, 5, 6, 6}, 26)},
  };
  cases[4].req.evictions = {{1, 2, 3}, {0, 1, 3}, {4, 5, 10}, {2, 1, 23}};
  cases[6].req.evictions = {{3, 4, 6}};
  cases[7].req.sampling = {0.7f, 0, 1.0f, 42};
  cases[8].req.sampling = {1.3f, 12, 0.9f, 7};
  cases[8].req.evictions = {{0, 3, 5}, {1, 1, 6}, {2, 2, 17}};
  return cases;
}

inline std::unique_ptr<LocalBackend> OpenBackend(const Stage& stage, const DecodeCase& c) {
  auto b = std::make_unique<LocalBackend>(stage, c.req.prompt.size() + c.req.gen);
  EXPECT_TRUE(b->SetWindow(c.window).ok());
  if (c.trace) b->EnableTrace();
  return b;
}

inline void ExpectSameResult(const DecodeResult& a, const DecodeResult& b) {
  const Status same = runtime::CompareResults(a, b, "a", "b");  // the one comparison
  EXPECT_TRUE(same.ok()) << same.ToString();
}

// Decodes c plainly and speculatively (options o; proposals from `source`,
// prompt lookup when null), each on a fresh backend of `stage`, expects
// the same result and adds the speculative run's counts to *total.
inline void ExpectSpeculativeEqualsPlain(const Stage& stage, const DecodeCase& c,
                                         const WitnessSeed& seed, const SpeculativeOptions& o,
                                         std::unique_ptr<ProposalSource> source,
                                         SpeculativeStats* total) {
  auto plain = RunDecode(*OpenBackend(stage, c), c.req, seed);
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  SpeculativeStats stats;
  auto spec = RunSpeculativeDecode(*OpenBackend(stage, c), c.req, seed, o, &stats, std::move(source));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  ExpectSameResult(*spec, *plain);
  total->proposed += stats.proposed;
  total->accepted += stats.accepted;
}

}  // namespace lockstep::testing
