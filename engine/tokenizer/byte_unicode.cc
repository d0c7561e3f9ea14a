#include "engine/tokenizer/byte_unicode.h"

#include <array>

#include "engine/tokenizer/utf8.h"

namespace lockstep {
namespace {

struct ByteTables {
  std::array<uint32_t, 256> to_cp{};
  std::array<std::string, 256> to_symbol;
  std::array<int16_t, 324> from_cp{};  // every mapped code point is < 324

  ByteTables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) ||
                             (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? static_cast<uint32_t>(b) : next++;
      from_cp[to_cp[b]] = static_cast<int16_t>(b);
      AppendUtf8(to_cp[b], &to_symbol[b]);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables tables;
  return tables;
}

}  // namespace

uint32_t ByteToCodepoint(uint8_t b) { return Tables().to_cp[b]; }

const std::string& ByteToSymbol(uint8_t b) { return Tables().to_symbol[b]; }

int CodepointToByte(uint32_t cp) {
  return cp < 324 ? Tables().from_cp[cp] : -1;
}

}  // namespace lockstep
