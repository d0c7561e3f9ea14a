#include "base/sha256.h"

#include "base/read_only_file.h"

// The chain stream uses OpenSSL's low-level SHA256_CTX because its state
// can be read and written (EVP cannot export a midstate); OpenSSL 3 marks
// these functions deprecated, not removed.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <vector>

namespace lockstep {
namespace {

constexpr size_t kBlock = 64;
constexpr size_t kLengthAt = 32, kBlockAt = 40, kNumAt = 104;

void PutU32Le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
uint32_t GetU32Le(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

Result<Sha256State> Sha256State::Parse(std::span<const uint8_t> in) {
  if (in.size() != kBytes) {
    return CorruptError("SHA-256 state is " + std::to_string(in.size()) + " bytes, expected " +
                        std::to_string(kBytes));
  }
  Sha256State s;
  std::memcpy(s.bytes.data(), in.data(), kBytes);
  const uint64_t bits =
      GetU32Le(in.data() + kLengthAt) | uint64_t{GetU32Le(in.data() + kLengthAt + 4)} << 32;
  const uint32_t num = GetU32Le(in.data() + kNumAt);
  if (num >= kBlock) {
    return CorruptError("SHA-256 state has " + std::to_string(num) +
                        " bytes pending, at most 63 can be");
  }
  if (bits % 8 != 0 || (bits / 8) % kBlock != num) {
    return CorruptError("SHA-256 state length of " + std::to_string(bits) +
                        " bits disagrees with its " + std::to_string(num) + " pending bytes");
  }
  for (size_t i = num; i < kBlock; ++i) {
    if (in[kBlockAt + i] != 0) {
      return CorruptError("SHA-256 state has data past its " + std::to_string(num) +
                          " pending bytes");
    }
  }
  return s;
}

struct Sha256Stream::Ctx : SHA256_CTX {};
static_assert(sizeof(SHA256_CTX) <= 112 && alignof(SHA256_CTX) <= 8,
              "Sha256Stream::ctx_bytes_ must hold a SHA256_CTX");

Sha256Stream::Ctx& Sha256Stream::ctx() {
  return *std::launder(reinterpret_cast<Ctx*>(ctx_bytes_.data()));
}
const Sha256Stream::Ctx& Sha256Stream::ctx() const {
  return *std::launder(reinterpret_cast<const Ctx*>(ctx_bytes_.data()));
}

Sha256Stream::Sha256Stream() {
  ::new (static_cast<void*>(ctx_bytes_.data())) Ctx();
  SHA256_Init(&ctx());
}

void Sha256Stream::Update(std::span<const uint8_t> bytes) {
  if (!bytes.empty()) SHA256_Update(&ctx(), bytes.data(), bytes.size());
}

void Sha256Stream::UpdateU32Le(uint32_t v) {
  const uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
  Update(std::span<const uint8_t>(b, 4));
}

Digest Sha256Stream::Finalize() {
  Digest d{};
  SHA256_Final(d.data(), &ctx());
  return d;
}

// OpenSSL keeps the pending bytes of the block, as bytes, in `data`
// (md32_common.h copies them there with memcpy), `num` of them.
Sha256State Sha256Stream::Export() const {
  const SHA256_CTX& c = ctx();
  Sha256State s;
  for (size_t i = 0; i < 8; ++i) PutU32Le(s.bytes.data() + 4 * i, c.h[i]);
  PutU32Le(s.bytes.data() + kLengthAt, c.Nl);
  PutU32Le(s.bytes.data() + kLengthAt + 4, c.Nh);
  std::memcpy(s.bytes.data() + kBlockAt, c.data, c.num);
  PutU32Le(s.bytes.data() + kNumAt, c.num);
  return s;
}

Result<Sha256Stream> Sha256Stream::Import(const Sha256State& state) {
  LOCKSTEP_ASSIGN_OR_RETURN(Sha256State s, Sha256State::Parse(state.bytes));
  Sha256Stream out;
  SHA256_CTX& c = out.ctx();
  for (size_t i = 0; i < 8; ++i) c.h[i] = GetU32Le(s.bytes.data() + 4 * i);
  c.Nl = GetU32Le(s.bytes.data() + kLengthAt);
  c.Nh = GetU32Le(s.bytes.data() + kLengthAt + 4);
  std::memcpy(c.data, s.bytes.data() + kBlockAt, kBlock);
  c.num = GetU32Le(s.bytes.data() + kNumAt);
  return out;
}

// One-shot hashing goes through EVP, independently of the stream above.
Digest Sha256(std::span<const uint8_t> bytes) {
  Digest d{};
  unsigned int n = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), d.data(), &n, EVP_sha256(), nullptr) != 1) {
    std::abort();  // OpenSSL out of memory: nothing sensible to report.
  }
  return d;
}

Result<Digest> Sha256File(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(ReadOnlyFile f, ReadOnlyFile::Open(path));
  return f.Sha256();
}

std::string ToHex(const Digest& d) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint8_t b : d) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

Result<Digest> DigestFromHex(std::string_view hex) {
  if (hex.size() != 64) return InvalidError("digest must be 64 hex characters, got " + std::to_string(hex.size()));
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  Digest d{};
  for (size_t i = 0; i < 32; ++i) {
    const int hi = nibble(hex[2 * i]), lo = nibble(hex[2 * i + 1]);
    if (hi < 0 || lo < 0) return InvalidError("digest has a non-hex character: " + std::string(hex));
    d[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return d;
}

}  // namespace lockstep
