// Message transport over ZeroMQ (cppzmq): a ROUTER server that addresses
// peers by explicit identity, a DEALER client with its own identity, and a
// poll helper. Each call moves exactly one frame (one Envelope) and every
// wait is bounded: timeouts return Timeout, vanished peers Disconnected,
// never a hang or a busy loop.
//
// Endpoints: "tcp://host:port" (port "*" binds an ephemeral port; read the
// real one from endpoint()), "ipc://path", "inproc://name" (same context);
// the syntax is checked first (wire/endpoint.h).
//
// Security (wire/link_security.h): tcp and ipc links are CURVE-encrypted
// and authenticated unless TransportOptions::security.insecure is set. A
// Server accepts only clients whose public key is on its allow-list (a ZAP
// handler refuses the others during the handshake: they cannot deliver a
// frame or receive one); a Client completes the handshake only with the
// server holding the pinned key. Incoming::peer_key names the
// authenticated client key on a Server.
//
// Ownership and threads: the zmq::context_t is made by the caller (main)
// and must outlive every Server/Client made from it. A Server or Client
// owns one socket and is NOT thread-safe: one thread owns it, does all its
// sends, receives and polls; hand it to another thread only with a
// happens-before edge (e.g. before starting that thread). Move-only.
//
// Size limit: frames over TransportOptions::max_message_bytes are refused
// before parsing -- by libzmq for tcp/ipc peers (ZMQ_MAXMSGSIZE, which
// drops the connection), and by Receive() for every transport.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <zmq.hpp>

#include "base/status.h"
#include "wire/envelope.h"
#include "wire/link_security.h"
#include "wire/zap_handler.h"

namespace lockstep::wire {

struct TransportOptions {
  std::chrono::milliseconds send_timeout{1000};  // ZMQ_SNDTIMEO
  std::chrono::milliseconds linger{200};         // ZMQ_LINGER on close
  std::chrono::milliseconds reconnect_min{100};  // ZMQ_RECONNECT_IVL
  std::chrono::milliseconds reconnect_max{5000}; // ZMQ_RECONNECT_IVL_MAX
  size_t max_message_bytes = DecodeLimits{}.max_frame_bytes;
  LinkSecurity security;  // ignored for inproc endpoints
  // Test hook: receives a copy of each outgoing frame after marshalling and
  // before sending, and may alter it (fault injection). Unset in production.
  std::function<void(std::vector<uint8_t>&)> mutate_outgoing_for_testing;
};

// One received frame. `peer` is the sender's identity on a Server and empty
// on a Client. bytes() views `body` (libzmq memory; not necessarily 8-byte
// aligned -- the decoders copy when it is not).
struct Incoming {
  std::string peer;
  // On a CURVE Server: the sender's authenticated public key (Z85). Empty
  // on a Client and on plaintext or inproc links.
  std::string peer_key;
  zmq::message_t body;
  std::span<const uint8_t> bytes() const {
    return {static_cast<const uint8_t*>(body.data()), body.size()};
  }
};

// A bound ROUTER socket with ZMQ_ROUTER_MANDATORY: sending to an unknown or
// departed identity fails with Disconnected instead of being dropped. A
// second connection claiming an identity already connected is ignored
// (no handover), so no peer can take over another's replies.
class Server {
 public:
  // Invalid for a malformed endpoint or key (naming which), or missing keys
  // without security.insecure; Io if the bind fails (port in use).
  static Result<Server> Bind(zmq::context_t& context, const std::string& endpoint,
                             TransportOptions options = {});

  Server(Server&&) = default;
  Server& operator=(Server&&) = default;

  // The bound endpoint with any ephemeral port resolved.
  const std::string& endpoint() const { return endpoint_; }

  // Disconnected: unknown peer; Timeout: peer's queue stayed full for
  // send_timeout; Invalid: frame over the size limit.
  Status Send(std::string_view peer, std::span<const uint8_t> frame);
  // Timeout: nothing within `timeout`; Invalid: oversized (dropped);
  // Corrupt: not an [identity][body] message (dropped).
  Result<Incoming> Receive(std::chrono::milliseconds timeout);

  // Adds a client key to the allow-list from now on (CURVE servers only;
  // Invalid otherwise or for a malformed key).
  Status AllowClient(const std::string& public_z85);

  zmq::socket_ref socket() { return socket_; }

 private:
  Server(zmq::socket_t socket, std::string endpoint, TransportOptions options,
         ZapDomain zap);
  ZapDomain zap_;  // declared first: outlives the socket
  zmq::socket_t socket_;
  std::string endpoint_;
  TransportOptions options_;
};

// A DEALER socket connected to one Server, identified by `identity`.
// Connecting is asynchronous: frames sent before the link is up are queued.
class Client {
 public:
  // REQUIRES: identity is 1..255 bytes and does not start with a zero byte.
  // Invalid for a malformed endpoint or key, or missing keys without
  // security.insecure.
  static Result<Client> Connect(zmq::context_t& context, const std::string& endpoint,
                                const std::string& identity,
                                TransportOptions options = {});

  Client(Client&&) = default;
  Client& operator=(Client&&) = default;

  const std::string& identity() const { return identity_; }

  // Timeout: the outgoing queue stayed full for send_timeout.
  Status Send(std::span<const uint8_t> frame);
  // As Server::Receive; Incoming::peer is empty.
  Result<Incoming> Receive(std::chrono::milliseconds timeout);

  zmq::socket_ref socket() { return socket_; }

 private:
  Client(zmq::socket_t socket, std::string identity, TransportOptions options);
  zmq::socket_t socket_;
  std::string identity_;
  TransportOptions options_;
};

// "PREFIX-" followed by 16 random hex digits: a Client identity that no
// other peer can predict and claim first.
std::string UnguessableIdentity(const std::string& prefix);

// Waits up to `timeout` for any of `sockets` to become readable; returns
// one flag per socket (all false on timeout or EINTR). Disconnected if the
// context was terminated. All sockets must belong to the calling thread.
Result<std::vector<bool>> PollReadable(std::span<zmq::socket_ref> sockets,
                                       std::chrono::milliseconds timeout);

}  // namespace lockstep::wire
