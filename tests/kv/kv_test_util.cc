#include "kv_test_util.h"

#include <filesystem>
#include <map>

#include <unistd.h>

#include "engine/io/synthetic_model.h"
#include "engine/ops/fp_env.h"
#include "engine/ops/kernels.h"

namespace lockstep::kvtest {
namespace {

class PinFp : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }
};
[[maybe_unused]] const auto* const kPin = ::testing::AddGlobalTestEnvironment(new PinFp);

struct Synthetic {
  const char* name;
  SyntheticShape shape;
  uint64_t seed;
};

// GQA group 1 (plain), 2 (bias + untied head), 3 (bias, 3 layers, theta 1e4).
std::vector<Synthetic> Synthetics() {
  SyntheticShape g1{48, 2, 3, 3, 96, 300, 100000, false, false};
  SyntheticShape g2{64, 2, 4, 2, 128, 320, 100000, true, true};
  SyntheticShape g3{48, 3, 6, 2, 96, 280, 10000, true, false};
  return {{"syn-g1", g1, 11}, {"syn-g2-bias-untied", g2, 22}, {"syn-g3-bias", g3, 33}};
}

// Synthetic models go to a directory of this process's own (ctest runs
// test processes in parallel), removed again once the model is open.
std::string ModelDir(const std::string& name) {
  for (const Synthetic& s : Synthetics()) {
    if (name != s.name) continue;
    const auto dir = std::filesystem::path(LOCKSTEP_BINARY_DIR) / "kv_test_models" /
                     (name + "." + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    const Status st = WriteSyntheticModel(dir.string(), s.shape, s.seed, "");
    EXPECT_TRUE(st.ok()) << st.ToString();
    return dir.string();
  }
  const std::string dir = std::string(LOCKSTEP_SHARED_DIR) + "/fixtures/conformance/" + name;
  return std::filesystem::exists(dir + "/model.safetensors") ? dir : "";
}

std::unique_ptr<TestModel> Load(const std::string& name) {
  const std::string dir = ModelDir(name);
  if (dir.empty()) return nullptr;
  auto open = OpenModelDir(dir, ModelPins{});
  if (dir.find("/kv_test_models/") != std::string::npos) {
    std::filesystem::remove_all(dir);  // the weights stay mapped
  }
  if (!open.ok()) {
    ADD_FAILURE() << name << ": " << open.status().ToString();
    return nullptr;
  }
  auto m = std::make_unique<TestModel>();
  m->name = name;
  m->open = std::move(open).value();
  const StageSpec whole{0, m->open.config.num_layers, true, true};
  auto stage = LoadStage(m->open, whole, ComputeOptions{"scalar"});
  auto weights = LoadRefWeights(*m->open.weights, m->open.config);
  if (!stage.ok() || !weights.ok()) {
    ADD_FAILURE() << name << ": cannot load the stage or its weights";
    return nullptr;
  }
  m->stage = std::move(stage->stage);  // one thread: no pool to keep
  m->weights = std::move(weights).value();
  return m;
}

}  // namespace

std::vector<std::string> AllModelNames() {
  std::vector<std::string> names = {"tiny-llama", "tiny-qwen", "tiny-daz", "tiny-qwen3",
                                    "tiny-qwen3-moe"};
  for (const Synthetic& s : Synthetics()) names.push_back(s.name);
  return names;
}

std::string TestName(std::string name) {
  for (char& ch : name) ch = (ch == '-') ? '_' : ch;
  return name;
}

const TestModel* GetModel(const std::string& name) {
  static std::map<std::string, std::unique_ptr<TestModel>> loaded;
  auto it = loaded.find(name);
  if (it == loaded.end()) it = loaded.emplace(name, Load(name)).first;
  return it->second.get();
}

std::unique_ptr<Stage> LoadSlice(const TestModel& m, int lo, int hi) {
  const StageSpec spec{lo, hi, lo == 0, hi == m.layers()};
  auto stage = LoadStage(m.open, spec, ComputeOptions{"scalar"});
  EXPECT_TRUE(stage.ok()) << stage.status().ToString();
  return stage.ok() ? std::move(stage->stage) : nullptr;
}

std::vector<uint32_t> Tokens(const TestModel& m, size_t n, uint32_t seed) {
  std::vector<uint32_t> out(n);
  uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
  for (size_t i = 0; i < n; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    out[i] = static_cast<uint32_t>((s >> 33) % m.vocab());
  }
  return out;
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::vector<float> KRows(const KvCache& c, int layer) {
  std::vector<float> out(c.size() * c.kv_width());
  for (size_t e = 0; e < c.size(); ++e) c.GetK(layer, e, out.data() + e * c.kv_width());
  return out;
}

std::vector<float> VRows(const KvCache& c, int layer) {
  std::vector<float> out(c.size() * c.kv_width());
  for (size_t e = 0; e < c.size(); ++e) c.GetV(layer, e, out.data() + e * c.kv_width());
  return out;
}

std::vector<float> KRow(const KvCache& c, int layer, size_t entry) {
  std::vector<float> out(c.kv_width());
  c.GetK(layer, entry, out.data());
  return out;
}

CacheSnapshot Snapshot(const KvCache& c) {
  CacheSnapshot s;
  s.positions.assign(c.positions().begin(), c.positions().end());
  const size_t n = c.size() * c.kv_width();
  for (int l = c.lo(); l < c.hi(); ++l) {
    s.k.push_back(KRows(c, l));
    s.kraw.emplace_back(c.kraw_data(l), c.kraw_data(l) + n);
    s.v.push_back(VRows(c, l));
    s.windows.push_back(c.window(l));
  }
  return s;
}

bool SameSnapshot(const CacheSnapshot& a, const CacheSnapshot& b) {
  if (a.positions != b.positions || a.windows != b.windows || a.k.size() != b.k.size()) {
    return false;
  }
  for (size_t l = 0; l < a.k.size(); ++l) {
    if (!SameBits(a.k[l], b.k[l]) || !SameBits(a.kraw[l], b.kraw[l]) || !SameBits(a.v[l], b.v[l])) {
      return false;
    }
  }
  return true;
}

std::string DescribeDiff(const KvCache& a, const KvCache& b, int lo, int hi) {
  if (!std::equal(a.positions().begin(), a.positions().end(), b.positions().begin(),
                  b.positions().end())) {
    return "positions differ (sizes " + std::to_string(a.size()) + " and " +
           std::to_string(b.size()) + ")";
  }
  if (a.kv_width() != b.kv_width()) return "kv widths differ";
  const size_t w = a.kv_width(), n = a.size() * w;
  auto kraw = [](const KvCache& c, int l) {
    return std::vector<float>(c.kraw_data(l), c.kraw_data(l) + c.size() * c.kv_width());
  };
  for (int l = lo; l < hi; ++l) {
    const std::pair<const char*, std::vector<float> (*)(const KvCache&, int)> tensors[] = {
        {"K", &KRows}, {"Kraw", kraw}, {"V", &VRows}};
    for (const auto& [name, rows] : tensors) {
      const std::vector<float> x = rows(a, l), y = rows(b, l);
      for (size_t i = 0; i < n; ++i) {
        if (Bits(x[i]) == Bits(y[i])) continue;
        return std::string(name) + " layer " + std::to_string(l) + " entry " +
               std::to_string(i / w) + " lane " + std::to_string(i % w) + ": " +
               std::to_string(x[i]) + " vs " + std::to_string(y[i]);
      }
    }
  }
  return "";
}

std::vector<std::vector<float>> Greedy(LocalBackend& b, std::vector<float> logits, int steps) {
  std::vector<std::vector<float>> out = {logits};
  for (int s = 0; s < steps; ++s) {
    const uint32_t next[1] = {ops::ArgmaxFirst(logits.data(), logits.size())};
    const Status st = b.Feed(next, &logits);
    EXPECT_TRUE(st.ok()) << st.ToString();
    out.push_back(logits);
  }
  return out;
}

}  // namespace lockstep::kvtest
