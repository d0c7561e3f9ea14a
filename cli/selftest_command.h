// `lockstep selftest`: the §1.3 FTZ/DAZ self-test, the §5.1 dot_seq
// regression, rsqrt(64) (§6.1), and the pinned table digests (§6.6, §7.2).
#pragma once

#include <CLI/CLI.hpp>

namespace lockstep::cli {

CLI::App* AddSelftestCommand(CLI::App& app);
int RunSelftestCommand();

}  // namespace lockstep::cli
