// Llama-3 rope_scaling (EXTENSIONS.md E1) against an independent Python
// transcription (llama3_rope_reference.py), bit for bit, over tables whose
// entries fall in all three bands; and parsing of rope_scaling.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "engine/io/model_config.h"
#include "engine/ops/rope.h"
#include "engine/rope_table.h"

namespace lockstep {
namespace {

struct Case {
  float theta;
  int head_dim;
  double factor, low, high, old;
};

std::string Hex(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", b);
  return buf;
}

// Runs the Python reference; returns {scaled bits, bands}.
std::pair<std::vector<std::string>, std::string> Reference(const Case& c,
                                                           const std::vector<float>& base) {
  const std::string in = ::testing::TempDir() + "/llama3_rope_in.txt";
  {
    std::ofstream f(in);
    f.precision(17);
    f << c.factor << " " << c.low << " " << c.high << " " << c.old << "\n";
    for (float v : base) f << Hex(v) << " ";
    f << "\n";
  }
  const std::string cmd = "python3 " LOCKSTEP_SOURCE_DIR "/tests/ops/llama3_rope_reference.py < " + in;
  FILE* p = ::popen(cmd.c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string text;
  char buf[4096];
  while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr) text += buf;
  EXPECT_EQ(p ? ::pclose(p) : -1, 0) << cmd;
  std::istringstream lines(text);
  std::string line1, bands;
  std::getline(lines, line1);
  std::getline(lines, bands);
  std::istringstream words(line1);
  std::vector<std::string> out;
  for (std::string w; words >> w;) out.push_back(w);
  return {out, bands};
}

TEST(Llama3Rope, EqualsTheIndependentReferenceBitForBit) {
  const Case cases[] = {
      {500000.0f, 64, 8.0, 1.0, 4.0, 8192.0},    // Llama-3.2-1B (head_dim 64)
      {500000.0f, 128, 8.0, 1.0, 4.0, 8192.0},   // Llama-3.1-8B
      {500000.0f, 128, 32.0, 1.0, 4.0, 8192.0},  // Llama-3.2-3B
      {500000.0f, 16, 8.0, 1.0, 4.0, 32.0},      // the tiny-llama3 fixture
      {10000.0f, 64, 4.0, 2.0, 8.0, 2048.0},
  };
  std::string all_bands;
  for (const Case& c : cases) {
    SCOPED_TRACE("theta " + std::to_string(c.theta) + " head_dim " + std::to_string(c.head_dim));
    const std::vector<float> base = ops::InvFreq(c.theta, c.head_dim);
    std::vector<float> scaled = base;
    ops::ScaleInvFreqLlama3(scaled, c.factor, c.low, c.high, c.old);
    auto [want, bands] = Reference(c, base);
    ASSERT_EQ(want.size(), scaled.size());
    for (size_t i = 0; i < scaled.size(); ++i) EXPECT_EQ(Hex(scaled[i]), want[i]) << "entry " << i;
    all_bands += bands;
  }
  // The cases exercise every branch.
  EXPECT_NE(all_bands.find('L'), std::string::npos);
  EXPECT_NE(all_bands.find('M'), std::string::npos);
  EXPECT_NE(all_bands.find('H'), std::string::npos);
}

TEST(Llama3Rope, ConfigDrivesTheModelTable) {
  const std::string base = R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "head_dim": 16,
    "max_position_embeddings": 8192, "rms_norm_eps": 1e-05, "rope_theta": 500000,
    "eos_token_id": [128001, 128008, 128009], )";
  auto c = ParseModelConfig(base + R"("rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
    "high_freq_factor": 4.0, "original_max_position_embeddings": 32, "rope_type": "llama3"}})",
                            "c.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->rope_scaling.has_value());
  EXPECT_EQ(c->head_dim, 16);
  std::vector<float> want = ops::InvFreq(500000.0f, 16);
  ops::ScaleInvFreqLlama3(want, 8.0, 1.0, 4.0, 32.0);
  EXPECT_EQ(std::memcmp(ModelInvFreq(*c).data(), want.data(), want.size() * 4), 0);
  EXPECT_NE(std::memcmp(ModelInvFreq(*c).data(), ops::InvFreq(500000.0f, 16).data(), 64), 0);

  for (const char* bad : {R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 4.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 32})",
                          R"({"rope_type": "llama3", "factor": -1, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 32})",
                          R"({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0})",
                          R"([1])"}) {
    auto r = ParseModelConfig(base + "\"rope_scaling\": " + bad + "}", "c.json");
    EXPECT_EQ(r.status().kind(), ErrorKind::kInvalid) << bad << " " << r.status().ToString();
    EXPECT_NE(r.status().message().find("rope_scaling"), std::string::npos);
  }
  auto yarn = ParseModelConfig(base + R"("rope_scaling": {"rope_type": "yarn", "factor": 4.0}})", "c");
  EXPECT_EQ(yarn.status().kind(), ErrorKind::kUnimplemented);
}

}  // namespace
}  // namespace lockstep
