// runtime::DecodeChecked and runtime::CompareResults: the one §12.4 check
// catches a second run that differs in a single logit bit of a single step,
// names what differs, and times only run 1's single-token steps; the one
// comparison names every field that differs.
#include <gtest/gtest.h>

#include <bit>

#include "runtime/checked_decode.h"
#include "runtime/compare.h"

namespace lockstep::testing {
namespace {

constexpr size_t kVocab = 7;

// Logits that depend on the cache length and the fed tokens; `flip_at`
// flips the lowest bit of one logit when the cache reaches that length.
class FakeBackend final : public StepBackend {
 public:
  explicit FakeBackend(uint32_t flip_at) : flip_at_(flip_at) {}
  Status Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) override {
    length_ += static_cast<uint32_t>(tokens.size());
    logits->assign(kVocab, 0.0f);
    for (size_t v = 0; v < kVocab; ++v) {
      (*logits)[v] = static_cast<float>((length_ * 31 + tokens.back() * 7 + v * 13) % 17) / 4.0f;
    }
    if (length_ == flip_at_) {
      (*logits)[3] = std::bit_cast<float>(std::bit_cast<uint32_t>((*logits)[3]) ^ 1u);
    }
    return Status::Ok();
  }
  Status Evict(uint32_t, uint32_t count) override {
    length_ -= count;
    return Status::Ok();
  }
  uint32_t CacheLength() const override { return length_; }

 private:
  uint32_t flip_at_;
  uint32_t length_ = 0;
};

// A factory whose n-th backend flips at flips[n] (0: never).
runtime::BackendFactory Factory(std::vector<uint32_t> flips) {
  auto opened = std::make_shared<size_t>(0);
  return [flips, opened]() -> Result<std::unique_ptr<StepBackend>> {
    const uint32_t flip = flips.at((*opened)++);
    return std::unique_ptr<StepBackend>(std::make_unique<FakeBackend>(flip));
  };
}

DecodeRequest Request() {
  DecodeRequest req;
  req.prompt = {1, 2, 3};
  req.gen = 6;
  return req;
}

TEST(CheckedDecode, TwoEqualRunsPassAndRunOneIsTimed) {
  auto r = runtime::DecodeChecked(Factory({0, 0}), Request(), WitnessSeed{}, 2);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->result.generated.size(), 6u);
  EXPECT_EQ(r->decode_steps, 5);  // the prefill is not a decode step
  EXPECT_GE(r->decode_ms_per_token, 0.0);
  EXPECT_GE(r->first_token, r->started);
}

TEST(CheckedDecode, OneFlippedBitInTheSecondRunFailsTheCheck) {
  auto r = runtime::DecodeChecked(Factory({0, 6}), Request(), WitnessSeed{}, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kInternal);
  EXPECT_NE(r.status().message().find("§12.4"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("per-step logits_sha256"), std::string::npos)
      << r.status().ToString();
  EXPECT_NE(r.status().message().find("cis2_ref"), std::string::npos) << r.status().ToString();
  // One run only: nothing to compare, nothing refused.
  EXPECT_TRUE(runtime::DecodeChecked(Factory({6}), Request(), WitnessSeed{}, 1).ok());
}

TEST(CompareResults, NamesEveryFieldThatDiffers) {
  DecodeResult a;
  a.prompt = {1};
  a.generated = {2, 3};
  a.logits_sha256.resize(2);
  DecodeResult b = a;
  EXPECT_TRUE(runtime::CompareResults(a, b, "x", "y").ok());
  b.generated[1] = 4;
  b.argmax_digest[0] = 1;
  b.logits_sha256[1][5] = 1;
  b.cis2_ref[31] = 1;
  b.prompt = {9};
  const Status st = runtime::CompareResults(a, b, "sharded", "monolithic");
  EXPECT_EQ(st.kind(), ErrorKind::kMismatch);
  for (const char* what : {"sharded != monolithic", "prompt_token_ids", "generated_token_ids",
                           "argmax_digest", "per-step logits_sha256", "cis2_ref (sharded "}) {
    EXPECT_NE(st.message().find(what), std::string::npos) << what << " in " << st.message();
  }
}

}  // namespace
}  // namespace lockstep::testing
