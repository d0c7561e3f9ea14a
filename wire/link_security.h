// LinkSecurity: how one end of a ZeroMQ link authenticates and encrypts
// (ZeroMQ CURVE, RFC 26), given as Z85 text keys (40 characters for 32
// bytes) so that wire/ never depends on any key file format.
//
//   server end: its own key pair + the public keys of the clients it
//               accepts (the allow-list, enforced by a ZAP handler before a
//               single frame of the client is delivered);
//   client end: its own key pair + the server's public key (pinned: a
//               server holding another key cannot complete the handshake).
//
// Plaintext needs `insecure = true`, chosen explicitly; the first plaintext
// tcp/ipc link of a process logs one warning. inproc links never leave the
// process, are never encrypted by ZeroMQ, and need neither.
// Secret keys are never put into a Status or a log line.
// Plain data: copyable, thread-compatible.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace lockstep::wire {

struct CurveKeyPair {
  std::string public_z85;
  std::string secret_z85;
};

struct LinkSecurity {
  bool insecure = false;
  CurveKeyPair own;                               // this end's key pair
  std::string server_public_z85;                  // client end: the pinned server key
  std::vector<std::string> allowed_clients_z85;   // server end: the allow-list
};

// Invalid (naming `what`, never echoing the key) unless `key` is 40 Z85
// characters that decode to 32 bytes.
Status ValidateCurveKey(std::string_view key, const std::string& what);

// A fresh CURVE key pair from libzmq (libsodium's RNG). Io if libzmq was
// built without CURVE.
Result<CurveKeyPair> GenerateCurveKeyPair();

// A short, non-secret label of a public key for messages: its first 8
// characters and an ellipsis ("k3Y(bG}x…").
std::string KeyLabel(std::string_view public_z85);

}  // namespace lockstep::wire
