// The KV properties through every kernel table this CPU offers (scalar,
// avx2, avx512...) and through a 2-thread pool: windowed prefill and
// decode, an eviction with moved survivors, and prefix reuse, each equal
// to the reference (reference.h) bit for bit.
#include <gtest/gtest.h>

#include <map>

#include "engine/ops/dispatch.h"
#include "engine/ops/kernels.h"
#include "engine/ops/thread_pool.h"
#include "engine/prefix.h"
#include "kv_test_util.h"
#include "reference.h"
#include "tests/fixture_absent.h"

namespace lockstep::kvtest {
namespace {

using IsaParam = std::tuple<std::string, std::string, size_t>;  // model, isa, threads

ops::ThreadPool* Pool() {
  static std::unique_ptr<ops::ThreadPool> pool = [] {
    auto p = ops::ThreadPool::Create(2);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? std::move(p).value() : nullptr;
  }();
  return pool.get();
}

class IsaTest : public ::testing::TestWithParam<IsaParam> {
 protected:
  void SetUp() override {
    const auto& [name, isa, threads] = GetParam();
    m_ = GetModel(name);
    if (m_ == nullptr) LOCKSTEP_FIXTURE_ABSENT() << name << " is absent";
    const ops::Kernels* k = ops::KernelsByName(isa);
    ASSERT_NE(k, nullptr) << isa;
    auto w = LoadStageWeights(*m_->open.weights, m_->open.config,
                              StageSpec{0, m_->layers(), true, true});
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    stage_ = std::make_unique<Stage>(m_->open.config, std::move(w).value(), *k,
                                     StageOptions{threads > 1 ? Pool() : nullptr});
    ref_ = std::make_unique<RefModel>(m_->open.config, m_->weights);
  }
  const TestModel* m_ = nullptr;
  std::unique_ptr<Stage> stage_;
  std::unique_ptr<RefModel> ref_;
};

TEST_P(IsaTest, WindowAndEvictionEqualTheReference) {
  const auto seq = Tokens(*m_, 11, 50);
  const std::span<const uint32_t> all(seq);
  const size_t hd = static_cast<size_t>(m_->open.config.head_dim);
  for (int window : {0, 3}) {
    SCOPED_TRACE("W=" + std::to_string(window));
    const auto windows = ref_->Windows(window);
    LocalBackend x(*stage_);
    ASSERT_TRUE(x.SetWindow(window).ok());
    RefCache rc = ref_->Empty();
    std::vector<float> lx;
    ASSERT_TRUE(x.Feed(all.first(3), &lx).ok());  // chunked prefill
    ASSERT_TRUE(x.Feed(all.subspan(3, 5), &lx).ok());
    const auto want = ref_->Run(rc, all.first(8), 0, windows);
    ASSERT_TRUE(SameBits(lx, want.back()));
    ASSERT_TRUE(x.Evict(2, 3).ok());  // survivors move
    RefEvict(rc, 2, 3, hd, m_->stage->inv_freq());
    ASSERT_TRUE(x.Feed(all.subspan(8), &lx).ok());
    auto w = ref_->Run(rc, all.subspan(8), 5, windows).back();
    ASSERT_TRUE(SameBits(lx, w));
    for (int s = 0; s < 4; ++s) {
      const uint32_t t = ops::ArgmaxFirst(lx.data(), lx.size());
      ASSERT_TRUE(x.Feed(std::span(&t, 1), &lx).ok());
      w = ref_->Step(rc, t, static_cast<int64_t>(rc.pos.size()), windows);
      ASSERT_TRUE(SameBits(lx, w)) << "decode step " << s;
    }
    EXPECT_EQ(CompareWithRef(rc, x.cache(), hd), "");
  }
}

TEST_P(IsaTest, PrefixReuseEqualsFullRecompute) {
  const auto seq = Tokens(*m_, 8, 51);
  const std::span<const uint32_t> all(seq);
  LocalBackend warm(*stage_), full(*stage_);
  std::vector<float> lw, lr, lf;
  ASSERT_TRUE(warm.Feed(all.first(5), &lw).ok());
  auto reuse = SessionFromPrefix(*stage_, warm.cache(), all.subspan(5), &lr);
  ASSERT_TRUE(reuse.ok());
  ASSERT_TRUE(full.Feed(all, &lf).ok());
  EXPECT_TRUE(SameBits(lr, lf));
  const auto gr = Greedy(*reuse, lr, 8), gf = Greedy(full, lf, 8);
  for (size_t s = 0; s < gr.size(); ++s) EXPECT_TRUE(SameBits(gr[s], gf[s])) << "step " << s;
  EXPECT_TRUE(reuse->cache().BitEqual(full.cache()));
}

std::vector<IsaParam> Params() {
  std::vector<IsaParam> out;
  for (const std::string& name : AllModelNames())
    for (const std::string& isa : ops::AvailableIsas())
      for (size_t threads : {size_t{1}, size_t{2}}) out.emplace_back(name, isa, threads);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Kernels, IsaTest, ::testing::ValuesIn(Params()), [](const auto& info) {
  return TestName(std::get<0>(info.param)) + "_" + std::get<1>(info.param) + "_t" +
         std::to_string(std::get<2>(info.param));
});

}  // namespace
}  // namespace lockstep::kvtest
