// Shared helpers for the whole-model tests: open a model folder, build a
// Stage for one (isa, threads, weight format) variant, run greedy decodes.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/io/synthetic_model.h"
#include "engine/local_backend.h"
#include "engine/model_loader.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/thread_pool.h"
#include "engine/stage.h"

namespace lockstep::testing {

inline std::string ConformanceDir(const std::string& name) {
  return std::string(LOCKSTEP_SHARED_DIR) + "/fixtures/conformance/" + name;
}

// A small untied GQA shape (4 layers, 5 query heads sharing one kv head)
// for tests that write their own checkpoints.
inline SyntheticShape SmallUntiedShape() {
  SyntheticShape s;
  s.hidden = 80, s.layers = 4, s.heads = 5, s.kv_heads = 1, s.inter = 200, s.vocab = 301;
  s.untied = true;
  return s;
}

// A path under the test temp directory with nothing at it yet.
inline std::string FreshPath(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/lockstep_" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

struct Variant {
  std::string isa = "scalar";
  size_t threads = 1;
  WeightFormat format = WeightFormat::kF32Rows;
  std::string Name() const {
    return isa + "/t" + std::to_string(threads) + "/fmt" + std::to_string(static_cast<int>(format));
  }
};

using Loaded = LoadedStage;

// The whole model as one Stage for variant `v`, through the Stage factory.
// A load that fails ends the test there (an exception GoogleTest reports as
// the test's failure), so no caller ever holds an empty stage.
inline Loaded Load(OpenModel& model, const Variant& v) {
  const StageSpec all{0, model.config.num_layers, true, true};
  auto loaded = LoadStage(model, all, ComputeOptions{v.isa, v.threads, v.format});
  if (!loaded.ok()) {
    throw std::runtime_error("loading " + v.Name() + ": " + loaded.status().ToString());
  }
  return std::move(loaded).value();
}

// Every variant this CPU supports: each ISA x {1, 2, 3} threads x formats.
inline std::vector<Variant> AllVariants() {
  std::vector<Variant> out;
  for (const std::string& isa : ops::AvailableIsas()) {
    for (size_t t : {1, 2, 3}) {
      for (WeightFormat f : {WeightFormat::kF32Rows, WeightFormat::kPackedF32, WeightFormat::kPackedBf16}) {
        if (isa == "scalar" && t > 1 && f != WeightFormat::kPackedBf16) continue;  // keep it quick
        out.push_back({isa, t, f});
      }
    }
  }
  return out;
}

// Greedy decode through the session path every front end runs
// (LocalBackend::Feed, its cache reserved); returns the logits of every
// step, concatenated ([gen][vocab]); stops at the first failed step.
inline std::vector<float> DecodeLogits(const Stage& stage, std::vector<uint32_t> prompt, size_t gen) {
  LocalBackend backend(stage, prompt.size() + gen);
  std::vector<float> all, logits;
  std::vector<uint32_t> feed = std::move(prompt);
  for (size_t step = 0; step < gen; ++step) {
    const Status st = backend.Feed(feed, &logits);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!st.ok()) break;
    all.insert(all.end(), logits.begin(), logits.end());
    feed = {ops::ArgmaxFirst(logits.data(), logits.size())};
  }
  return all;
}

}  // namespace lockstep::testing
