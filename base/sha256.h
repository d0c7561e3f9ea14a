// SHA-256 through OpenSSL's EVP interface: one-shot over bytes or a file,
// and a streaming hasher for the witness chain (CIS-2 §12.1).
// Sha256Stream is a resource type (not copyable); not thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "base/status.h"

namespace lockstep {

using Digest = std::array<uint8_t, 32>;

// Lowercase hex, 64 characters. Display only: hashes feed raw bytes.
std::string ToHex(const Digest& d);
// Parses 64 hex characters (either case). Invalid on anything else.
Result<Digest> DigestFromHex(std::string_view hex);

Digest Sha256(std::span<const uint8_t> bytes);
inline Digest Sha256(std::string_view s) {
  return Sha256(std::span<const uint8_t>(
      reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}
// Streams the file in chunks; IoError/NotFound name the path.
Result<Digest> Sha256File(const std::string& path);

class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream();
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  Sha256Stream(Sha256Stream&&) noexcept;
  Sha256Stream& operator=(Sha256Stream&&) noexcept;

  void Update(std::span<const uint8_t> bytes);
  void Update(const Digest& d) { Update(std::span<const uint8_t>(d)); }
  void UpdateU32Le(uint32_t v);
  // REQUIRES: called once; the stream is spent afterwards.
  Digest Finalize();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lockstep
