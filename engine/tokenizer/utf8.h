// UTF-8 helpers shared by the tokenizer: lossy validation with the same
// replacement rule as Rust's String::from_utf8_lossy (each maximal invalid
// subpart becomes one U+FFFD), and code point encoding.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace lockstep {

// True iff `bytes` is well-formed UTF-8 (no surrogates, no overlongs,
// nothing above U+10FFFF). NUL bytes are valid.
bool IsValidUtf8(std::string_view bytes);

// Returns `bytes` with every maximal invalid subpart replaced by U+FFFD
// ("\xEF\xBF\xBD"), matching Rust's String::from_utf8_lossy. Valid input is
// returned unchanged.
std::string LossyUtf8(std::string_view bytes);

// Appends the UTF-8 encoding of `cp`. REQUIRES: cp is a Unicode scalar value.
void AppendUtf8(uint32_t cp, std::string* out);

}  // namespace lockstep
