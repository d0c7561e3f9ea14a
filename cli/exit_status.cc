#include "cli/exit_status.h"

#include <iostream>

namespace lockstep::cli {

int ExitStatus(std::string_view command, const Status& status) {
  if (status.ok()) return 0;
  std::cerr << "lockstep " << command << ": " << status.ToString() << "\n";
  return 1;
}

}  // namespace lockstep::cli
