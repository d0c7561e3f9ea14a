// The one way a subcommand ends: its Status becomes the process exit code.
// Ok -> 0; otherwise "lockstep COMMAND: <kind>: <message>" on stderr and 1.
#pragma once

#include <string_view>

#include "base/status.h"

namespace lockstep::cli {

int ExitStatus(std::string_view command, const Status& status);

}  // namespace lockstep::cli
