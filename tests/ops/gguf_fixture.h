// A small synthetic GGUF model for the tests of the GGUF loading path:
// hidden 256, so K-quant rows are whole blocks, and 3 layers, so q4_k_m's
// mix gives Q6_K to some layers' attn_v and ffn_down and Q4_K to the rest.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "engine/io/model_config.h"
#include "engine/io/synthetic_gguf.h"
#include "engine/io/synthetic_model.h"
#include "model_fixture.h"

namespace lockstep::testing {

// FreshPath(tag)/model.gguf, every matrix of quant mix `type`; qwen2 with
// biases and an untied head when `qwen`.
inline std::string GgufModel(const std::string& tag, const std::string& type, bool qwen = false,
                             uint64_t seed = 21) {
  const std::string dir = FreshPath("gguf_" + tag);
  std::filesystem::create_directories(dir);
  SyntheticShape s;
  s.hidden = 256, s.layers = 3, s.heads = 4, s.kv_heads = 2, s.inter = 512, s.vocab = 300;
  s.bias = qwen, s.untied = qwen;
  auto cfg = ParseModelConfig(SyntheticConfigJson(s), "shape");
  EXPECT_TRUE(cfg.ok());
  const std::string path = dir + "/model.gguf";
  const Status st = WriteSyntheticGguf(path, *cfg, qwen, *GgufQuantMixByName(type), seed, {});
  EXPECT_TRUE(st.ok()) << st.ToString();
  return path;
}

}  // namespace lockstep::testing
