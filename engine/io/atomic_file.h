// Whole-file writes that never leave a half-written file at the target path:
// the bytes go to a fresh temporary file in the same directory, which is
// then renamed over `path` (atomic on POSIX file systems). The temporary is
// removed on failure. The result is mode 0644. Stateless; thread-safe for
// distinct paths.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lockstep {

// Receives the file's bytes in order, piece by piece.
using ByteSink = std::function<Status(std::span<const uint8_t> bytes)>;

// Writes what `produce` hands its sink, in order (for a file too large to
// hold in memory at once). An error `produce` returns (or a failing write,
// which the sink returns to it) abandons the file. Io errors name the path.
Status WriteFileAtomically(const std::string& path,
                           const std::function<Status(const ByteSink& write)>& produce);

// Writes the concatenation of `parts`. Io errors name the path.
Status WriteFileAtomically(const std::string& path,
                           const std::vector<std::span<const uint8_t>>& parts);

inline Status WriteFileAtomically(const std::string& path, std::string_view text) {
  return WriteFileAtomically(
      path, {std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()),
                                      text.size())});
}

}  // namespace lockstep
