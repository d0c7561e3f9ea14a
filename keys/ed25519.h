// Ed25519 signatures (RFC 8032, pure Ed25519) through OpenSSL's EVP
// interface. A signing key is its 32-byte seed; a public key is the raw
// 32-byte encoding; a signature is 64 bytes. Functions are stateless and
// thread-safe. Callers must not log seeds.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "base/status.h"

namespace lockstep::keys {

using Ed25519Seed = std::array<uint8_t, 32>;
using Ed25519Public = std::array<uint8_t, 32>;
using Ed25519Signature = std::array<uint8_t, 64>;

// 32 bytes from OpenSSL's CSPRNG; Internal if the RNG fails.
Result<Ed25519Seed> GenerateEd25519Seed();
// The public key of a seed.
Result<Ed25519Public> Ed25519PublicFromSeed(const Ed25519Seed& seed);
// Signs `message` (the whole message; Ed25519 hashes it itself).
Result<Ed25519Signature> Ed25519Sign(const Ed25519Seed& seed,
                                     std::span<const uint8_t> message);
// Ok when `signature` is a valid signature of `message` by `public_key`;
// Mismatch ("signature does not verify ...") otherwise, Invalid when the
// public key is not a valid curve point.
Status Ed25519Verify(const Ed25519Public& public_key, std::span<const uint8_t> message,
                     const Ed25519Signature& signature);

}  // namespace lockstep::keys
