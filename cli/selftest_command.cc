#include "cli/selftest_command.h"

#include <bit>
#include <cstdio>
#include <iostream>

#include "base/sha256.h"
#include "engine/ops/fp_env.h"
#include "engine/ops/kernels.h"
#include "engine/ops/pinned_math.h"
#include "engine/ops/rope.h"

namespace lockstep::cli {
namespace {

// Pinned values from CIS-2 §6.6 and §7.2 (SmolLM2-135M: head_dim 64, theta 1e5).
constexpr const char* kTableDigest =
    "23c7bfaf5cef0095fd021af2eb1808abb4928bae4219756d86bdac670a06b35d";
constexpr const char* kInvFreqDigest =
    "da9f6dcfde0425588815509e874515cdcd3d6b8818b6d0136590052e7bbf6f12";

bool Check(const char* name, bool ok, const std::string& detail) {
  std::cout << (ok ? "PASS " : "FAIL ") << name << ": " << detail << "\n";
  return ok;
}

std::string Bits(float f) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", std::bit_cast<uint32_t>(f));
  return buf;
}

}  // namespace

CLI::App* AddSelftestCommand(CLI::App& app) {
  return app.add_subcommand("selftest", "FP environment, pinned math and table digests");
}

int RunSelftestCommand() {
  bool ok = true;
  const Status pin = ops::PinFpEnvironment();
  ok &= Check("ftz_daz", pin.ok(), pin.ok() ? "pinned and read back, denormal self-test passed"
                                            : pin.ToString());
  const float a[3] = {1e8f, 1.0f, -1e8f}, b[3] = {1.0f, 1.0f, 1.0f};
  const float dot = ops::DotSeq(a, b, 3);
  ok &= Check("dot_seq", std::bit_cast<uint32_t>(dot) == 0u, "[1e8,1,-1e8].[1,1,1] = " + Bits(dot));
  const float r = ops::Rsqrt(64.0f);
  ok &= Check("rsqrt", std::bit_cast<uint32_t>(r) == 0x3E000000u, "rsqrt(64) = " + Bits(r));
  const std::string table = ToHex(ops::TableDigest());
  ok &= Check("table_digest", table == kTableDigest, table);
  const std::string inv = ToHex(ops::InvFreqDigest(ops::InvFreq(100000.0f, 64)));
  ok &= Check("inv_freq_table_digest", inv == kInvFreqDigest, inv + " (head_dim 64, theta 1e5)");
  std::cout << (ok ? "selftest passed" : "selftest FAILED") << "\n";
  return ok ? 0 : 1;
}

}  // namespace lockstep::cli
