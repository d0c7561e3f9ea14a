#include "engine/tokenizer/utf8.h"

#include <cassert>

namespace lockstep {
namespace {

bool IsCont(uint8_t b) { return (b & 0xC0) == 0x80; }

// Length of the valid sequence starting at s[i], or 0 if invalid; on 0,
// *bad is the length of the maximal invalid subpart (>= 1) to replace.
size_t ValidSequenceLength(std::string_view s, size_t i, size_t* bad) {
  const size_t n = s.size();
  const uint8_t b0 = static_cast<uint8_t>(s[i]);
  *bad = 1;
  if (b0 < 0x80) return 1;
  size_t width = 0;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    width = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    width = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    width = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + 1 >= n) return 0;
  const uint8_t b1 = static_cast<uint8_t>(s[i + 1]);
  if (b1 < lo || b1 > hi) return 0;
  for (size_t k = 2; k < width; ++k) {
    *bad = k;
    if (i + k >= n || !IsCont(static_cast<uint8_t>(s[i + k]))) return 0;
  }
  return width;
}

}  // namespace

bool IsValidUtf8(std::string_view bytes) {
  size_t i = 0, bad = 0;
  while (i < bytes.size()) {
    const size_t len = ValidSequenceLength(bytes, i, &bad);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string LossyUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() + 8);
  size_t i = 0, bad = 0;
  while (i < bytes.size()) {
    const size_t len = ValidSequenceLength(bytes, i, &bad);
    if (len == 0) {
      out.append("\xEF\xBF\xBD");
      i += bad;
    } else {
      out.append(bytes.substr(i, len));
      i += len;
    }
  }
  return out;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  assert(cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF));
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace lockstep
