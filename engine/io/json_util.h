// Strict JSON parsing for untrusted files (safetensors headers, config.json,
// pin manifests), wrapping nlohmann::json so no exception leaves engine/io.
//
// Strict means: the text must be one complete JSON value (surrounding
// whitespace allowed, no NUL byte), nesting at most kMaxJsonDepth deep, and no object may
// repeat a key (nlohmann would silently keep the last one, which lets two
// readers of the same file disagree). Stateless functions: thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

#include "base/status.h"

namespace lockstep {

inline constexpr int kMaxJsonDepth = 64;

// On failure returns Status(kind, "<source>: <what is wrong>").
Result<nlohmann::json> ParseJsonStrict(std::string_view text,
                                       const std::string& source,
                                       ErrorKind kind);

// Short human-readable name of a JSON value's type ("string", "array"...).
const char* JsonTypeName(const nlohmann::json& j);

}  // namespace lockstep
