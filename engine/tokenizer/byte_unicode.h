// The GPT-2 byte <-> Unicode bijection of CIS-2 §3.1.5.a: 188 printable
// bytes map to themselves, the other 68 to U+0100.. in ascending byte order.
// Both directions come from one construction. Immutable tables; thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace lockstep {

// Code point that byte `b` is written as inside byte-level tokens.
uint32_t ByteToCodepoint(uint8_t b);

// UTF-8 text of ByteToCodepoint(b) (1 or 2 bytes).
const std::string& ByteToSymbol(uint8_t b);

// Inverse map: the byte written as `cp`, or -1 if `cp` is not in the
// byte-level alphabet.
int CodepointToByte(uint32_t cp);

}  // namespace lockstep
