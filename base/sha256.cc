#include "base/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

namespace lockstep {

struct Sha256Stream::Impl {
  EVP_MD_CTX* ctx = nullptr;
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Sha256Stream::Sha256Stream() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  if (impl_->ctx == nullptr || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1) {
    std::abort();  // OpenSSL out of memory: nothing sensible to report.
  }
}
Sha256Stream::~Sha256Stream() = default;
Sha256Stream::Sha256Stream(Sha256Stream&&) noexcept = default;
Sha256Stream& Sha256Stream::operator=(Sha256Stream&&) noexcept = default;

void Sha256Stream::Update(std::span<const uint8_t> bytes) {
  if (!bytes.empty()) EVP_DigestUpdate(impl_->ctx, bytes.data(), bytes.size());
}

void Sha256Stream::UpdateU32Le(uint32_t v) {
  const uint8_t b[4] = {uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
  Update(std::span<const uint8_t>(b, 4));
}

Digest Sha256Stream::Finalize() {
  Digest d{};
  unsigned int n = 0;
  EVP_DigestFinal_ex(impl_->ctx, d.data(), &n);
  return d;
}

Digest Sha256(std::span<const uint8_t> bytes) {
  Sha256Stream s;
  s.Update(bytes);
  return s.Finalize();
}

Result<Digest> Sha256File(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(path + ": cannot open (" + std::strerror(errno) + ")");
  Sha256Stream s;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    const auto got = static_cast<size_t>(in.gcount());
    s.Update(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(buf.data()), got));
  }
  if (in.bad()) return IoError(path + ": read failed");
  return s.Finalize();
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
