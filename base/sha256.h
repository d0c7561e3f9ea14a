// SHA-256 through OpenSSL: one-shot over bytes (EVP) or a file, and a
// streaming hasher for the witness chain (CIS-2 §12.1) whose state can be
// exported mid-stream and resumed elsewhere (Sha256State), so one SHA-256
// stream can be continued by another process bit for bit.
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

// A Sha256Stream's state between two updates, in a fixed host-independent
// layout (docs/wire_protocol.md, "Chain state"); 108 bytes:
//   [0, 32)    h[0..7], the chaining value, each u32 LE
//   [32, 40)   u64 LE, the number of bits hashed so far
//   [40, 104)  the partial block: its first `num` bytes, then zeros
//   [104, 108) u32 LE num = (bits / 8) mod 64
// Plain data; Parse is the one way to accept bytes from outside.
struct Sha256State {
  static constexpr size_t kBytes = 108;
  std::array<uint8_t, kBytes> bytes{};

  // Corrupt naming what is wrong unless `bytes` is exactly kBytes long and
  // consistent: num < 64, the bit count a whole number of bytes whose
  // remainder mod 64 is num, and the partial block zero past num.
  static Result<Sha256State> Parse(std::span<const uint8_t> bytes);
  bool operator==(const Sha256State&) const = default;
};

class Sha256Stream {
 public:
  Sha256Stream();
  ~Sha256Stream() = default;
  Sha256Stream(const Sha256Stream&) = delete;
  Sha256Stream& operator=(const Sha256Stream&) = delete;
  Sha256Stream(Sha256Stream&&) noexcept = default;
  Sha256Stream& operator=(Sha256Stream&&) noexcept = default;

  void Update(std::span<const uint8_t> bytes);
  void Update(const Digest& d) { Update(std::span<const uint8_t>(d)); }
  void UpdateU32Le(uint32_t v);
  // REQUIRES: called once; the stream is spent afterwards.
  Digest Finalize();

  // The state after every byte so far; the stream continues unchanged.
  Sha256State Export() const;
  // A stream that continues from `state` exactly as the exporting stream
  // would have. Corrupt (as Sha256State::Parse) on an inconsistent state.
  static Result<Sha256Stream> Import(const Sha256State& state);

 private:
  // OpenSSL's SHA256_CTX, held inline (its size is checked in the .cc) so
  // that streams, and chains resumed on a pipeline's last stage, never
  // allocate. Moving copies it: the context is plain data.
  struct Ctx;
  Ctx& ctx();
  const Ctx& ctx() const;
  alignas(8) std::array<uint8_t, 112> ctx_bytes_{};
};

}  // namespace lockstep
