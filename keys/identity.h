// Node identities: one key file format for both uses of a key pair,
// ZeroMQ CURVE link authentication and Ed25519 receipt signatures.
//
// A secret file (written mode 0600) and its public twin PATH.pub are text,
// one `name = value` per line, '#' comments and blank lines ignored:
//   curve_public = <Z85, 40 chars>     curve_secret = <Z85, 40 chars>
//   sign_public  = <hex, 64 chars>     sign_secret  = <hex, 64 chars: the seed>
// The .pub file holds only the two *_public lines. Reading checks that
// each secret matches its public key, rejects unknown or repeated names,
// and refuses a secret file that group or others may read. Errors name
// the file and the line; they never contain key material.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace lockstep::keys {

struct PublicIdentity {
  std::string curve_public_z85;          // 40 Z85 characters
  std::array<uint8_t, 32> sign_public{};  // raw Ed25519 public key

  bool operator==(const PublicIdentity&) const = default;
};

struct Identity {
  PublicIdentity pub;
  std::string curve_secret_z85;          // 40 Z85 characters
  std::array<uint8_t, 32> sign_seed{};   // Ed25519 seed
};

// A fresh identity from the system CSPRNG.
Result<Identity> GenerateIdentity();

// Writes `path` (secret, 0600) and `path`.pub (public, 0644), each
// atomically. Refuses (Invalid, naming the file) when either exists unless
// `overwrite`.
Status WriteIdentity(const Identity& identity, const std::string& path, bool overwrite = false);

// Reads a secret key file.
Result<Identity> ReadIdentity(const std::string& path);
// Reads the public half of a key file: a .pub file, or a secret file.
Result<PublicIdentity> ReadPublicIdentity(const std::string& path);

// Display forms for logs and receipts (never of secrets).
std::string SignPublicHex(const PublicIdentity& pub);
// Parses 64 hex characters into an Ed25519 public key.
Result<std::array<uint8_t, 32>> ParseSignPublicHex(const std::string& hex);

}  // namespace lockstep::keys
