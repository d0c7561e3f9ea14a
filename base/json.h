// JSON text from outside the process (model files, receipts, request
// bodies, cluster configs, a child's readiness line): the one way this
// tree parses it, wrapping nlohmann::json so no exception escapes.
//
// Strict means: the text must be one complete JSON value (surrounding
// whitespace allowed, no NUL byte), at most kMaxJsonBytes long, nesting at
// most kMaxJsonDepth deep (checked before the parser runs, so a hostile
// "[[[[..." costs one scan and never reaches code that recurses), and no
// object may repeat a key (nlohmann would silently keep the last one,
// which lets two readers of the same text disagree). Numbers are
// nlohmann's: integers that fit stay integers (signed or unsigned 64-bit),
// others become an IEEE-754 double rounded once from the decimal text (the
// f64 of CIS-2 §2.3; a reader wanting f32 casts that double once); a
// number beyond the double range is an error. Callers that know a
// tighter size bound (a request body, a readiness line) check it first.
// Stateless functions: thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lockstep {

inline constexpr int kMaxJsonDepth = 64;
inline constexpr size_t kMaxJsonBytes = size_t{128} << 20;

// On failure returns Status(kind, "<source>: <what is wrong>"), naming a
// repeated key.
Result<nlohmann::json> ParseJsonStrict(std::string_view text,
                                       const std::string& source,
                                       ErrorKind kind);

// Short human-readable name of a JSON value's type ("string", "array"...).
const char* JsonTypeName(const nlohmann::json& j);

}  // namespace lockstep
