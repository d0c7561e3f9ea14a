// Validation of a safetensors file's header against its own bytes
// (docs/safetensors.md lists every rule). Used by SafetensorsFile; exposed
// so the rules can be tested one by one. Stateless: thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/io/safetensors.h"

namespace lockstep {

// Largest header length accepted (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeader = 100ull << 20;

// Parses and validates the header of a file of `file_size` bytes whose
// first bytes are `head` (at least the 8-byte length and the header it
// announces, when the file has them). Returns every tensor sorted by name,
// each range inside the data section, non-empty ranges pairwise disjoint.
// Any failure: Corrupt "<name>: ...".
Result<std::vector<TensorInfo>> ParseSafetensorsHeader(
    std::span<const uint8_t> head, uint64_t file_size, const std::string& name);

}  // namespace lockstep
