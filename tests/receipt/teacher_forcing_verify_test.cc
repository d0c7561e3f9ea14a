// verify by teacher forcing reports what verify by decode replay reports:
// for every kind of receipt (greedy, sampled, windowed, evicting, long,
// traced), clean and tampered — a token, a logits digest, a layer digest,
// the chain, an eviction option — receipt::FirstDivergence of the receipt
// against TeacherForce's recomputation equals it against RunDecode's.
// (The CLI tests verify the same receipts sharded, end to end.)
#include <gtest/gtest.h>

#include <functional>

#include "decode_cases.h"
#include "engine/io/synthetic_model.h"
#include "engine/ops/fp_env.h"
#include "engine/teacher_forcing.h"
#include "model_fixture.h"
#include "receipt/receipt.h"

namespace lockstep::testing {
namespace {

using Edit = std::function<void(receipt::ParsedReceipt&)>;

// The receipt of a plain decode of `c`, as a verifier parses it.
receipt::ParsedReceipt ReceiptOf(const DecodeCase& c, const DecodeResult& r, const WitnessSeed& seed) {
  receipt::ReceiptInputs in;
  in.result = &r;
  in.seed = seed;
  if (c.window > 0) in.window = c.window;
  in.evictions = c.req.evictions;
  in.sampling = c.req.sampling;
  auto parsed = receipt::ParseReceipt(receipt::BuildReceipt(in));
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : receipt::ParsedReceipt{};
}

std::vector<std::pair<std::string, Edit>> Edits(uint32_t gen, bool traced) {
  const uint32_t s = gen / 2;
  std::vector<std::pair<std::string, Edit>> edits = {
      {"clean", [](receipt::ParsedReceipt&) {}},
      {"token", [s](receipt::ParsedReceipt& r) { r.generated[s] = (r.generated[s] + 1) % 300; }},
      {"first token", [](receipt::ParsedReceipt& r) { r.generated[0] = (r.generated[0] + 7) % 300; }},
      {"token outside", [s](receipt::ParsedReceipt& r) { r.generated[s] = 1000; }},
      {"logits", [s](receipt::ParsedReceipt& r) { r.logits_sha256[s][0] ^= 1; }},
      {"chain", [](receipt::ParsedReceipt& r) { r.cis2_ref[5] ^= 1; }},
      {"eviction", [](receipt::ParsedReceipt& r) { r.evictions = {{0, 2, 1}}; }},
  };
  if (traced) {
    edits.push_back({"layer", [s](receipt::ParsedReceipt& r) { r.trace[s][1][0] ^= 1; }});
  }
  return edits;
}

// What verify reports for `r`: its first divergence from the recomputation.
std::string Report(const receipt::ParsedReceipt& r, const Result<DecodeResult>& again) {
  if (!again.ok()) return "error: " + again.status().ToString();
  const auto d = receipt::FirstDivergence(r, *again);
  return d ? d->what : "VERIFIED";
}

TEST(TeacherForcingVerify, ReportsWhatADecodeReplayReports) {
  ASSERT_TRUE(ops::PinFpEnvironment().ok());
  const std::string dir = FreshPath("tf_verify");
  SyntheticShape shape = SmallUntiedShape();
  shape.vocab = 300;
  ASSERT_TRUE(WriteSyntheticModel(dir, shape, 11, "").ok());
  auto model = OpenModelDir(dir, ModelPins{});
  ASSERT_TRUE(model.ok());
  Loaded l = Load(*model, Variant{"auto", 2, WeightFormat::kPackedBf16});
  for (const DecodeCase& c : DecodeCases()) {
    auto plain = RunDecode(*OpenBackend(*l.stage, c), c.req, model->Seed());
    ASSERT_TRUE(plain.ok());
    for (const auto& [name, edit] : Edits(c.req.gen, c.trace)) {
      SCOPED_TRACE(c.name + " " + name);
      receipt::ParsedReceipt r = ReceiptOf(c, *plain, model->Seed());
      edit(r);
      DecodeCase again = c;  // the receipt's options, as verify reads them
      again.req.evictions = r.evictions;
      const std::string replay = Report(r, RunDecode(*OpenBackend(*l.stage, again), again.req, model->Seed()));
      const std::string forced = Report(
          r, TeacherForce(*OpenBackend(*l.stage, again), again.req, r.generated, 300, model->Seed()));
      EXPECT_EQ(forced, replay);
      EXPECT_EQ(name == "clean", replay == "VERIFIED") << replay;
    }
  }
}

}  // namespace
}  // namespace lockstep::testing
