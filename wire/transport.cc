#include "wire/transport.h"

#include <array>
#include <cerrno>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <random>
#include <utility>

#include "wire/endpoint.h"

namespace lockstep::wire {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

Status FromZmqError(int err, const std::string& what) {
  std::string message = what + ": " + zmq_strerror(err);
  switch (err) {
    case ETERM:
    case EHOSTUNREACH:
    case ENOTSOCK:
      return DisconnectedError(std::move(message));
    case EAGAIN:
      return TimeoutError(std::move(message));
    case EINVAL:
    case EPROTONOSUPPORT:
    case ENOCOMPATPROTO:
      return InvalidError(std::move(message));
    default:
      return IoError(std::move(message));
  }
}

void ApplyCommonOptions(zmq::socket_t& socket, const TransportOptions& o) {
  socket.set(zmq::sockopt::linger, static_cast<int>(o.linger.count()));
  socket.set(zmq::sockopt::sndtimeo, static_cast<int>(o.send_timeout.count()));
  socket.set(zmq::sockopt::reconnect_ivl, static_cast<int>(o.reconnect_min.count()));
  socket.set(zmq::sockopt::reconnect_ivl_max,
             static_cast<int>(o.reconnect_max.count()));
  socket.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(o.max_message_bytes));
}

// Waits until `socket` is readable or `deadline` passes; never spins: each
// iteration blocks in zmq_poll for the remaining time.
Status WaitReadable(zmq::socket_ref socket, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<milliseconds>(deadline - Clock::now());
    zmq_pollitem_t item{socket.handle(), 0, ZMQ_POLLIN, 0};
    const int rc = zmq_poll(&item, 1, std::max<long>(0, left.count()));
    if (rc > 0) return Status::Ok();
    if (rc < 0 && zmq_errno() != EINTR) return FromZmqError(zmq_errno(), "poll");
    if (Clock::now() >= deadline) return TimeoutError("no message");
  }
}

// Reads every part of the next message; an empty vector if none is queued.
std::vector<zmq::message_t> ReadParts(zmq::socket_ref socket) {
  std::vector<zmq::message_t> parts;
  zmq::message_t part;
  if (!socket.recv(part, zmq::recv_flags::dontwait)) return parts;
  bool more = part.more();
  parts.push_back(std::move(part));
  while (more) {  // later parts of a multipart message arrive atomically
    zmq::message_t next;
    if (!socket.recv(next, zmq::recv_flags::none)) break;
    more = next.more();
    parts.push_back(std::move(next));
  }
  return parts;
}

Result<std::vector<zmq::message_t>> ReceiveParts(zmq::socket_ref socket,
                                                 milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  try {
    for (;;) {
      // A caller that polled first finds the message queued: it is read
      // without polling again (and a drained socket costs one call).
      std::vector<zmq::message_t> parts = ReadParts(socket);
      if (!parts.empty()) return parts;
      Status waited = timeout.count() > 0 ? WaitReadable(socket, deadline)
                                          : TimeoutError("no message");
      if (!waited.ok()) {
        if (waited.kind() != ErrorKind::kTimeout) return waited;
        return TimeoutError("no message within " + std::to_string(timeout.count()) +
                            " ms");
      }
    }
  } catch (const zmq::error_t& e) {
    return FromZmqError(e.num(), "receive");
  }
}

Status CheckSize(size_t bytes, const TransportOptions& o, const std::string& who) {
  if (bytes <= o.max_message_bytes) return Status::Ok();
  return InvalidError("message of " + std::to_string(bytes) + " bytes " + who +
                      " exceeds the limit of " + std::to_string(o.max_message_bytes));
}

// Sends `frame` as the last part, through the test hook when one is set.
Status SendBody(zmq::socket_ref socket, std::span<const uint8_t> frame,
                const TransportOptions& o, const std::string& who) {
  std::vector<uint8_t> mutated;
  if (o.mutate_outgoing_for_testing) {
    mutated.assign(frame.begin(), frame.end());
    o.mutate_outgoing_for_testing(mutated);
    frame = mutated;
  }
  if (!socket.send(zmq::buffer(frame.data(), frame.size()), zmq::send_flags::none)) {
    return TimeoutError("send " + who + " timed out after " +
                        std::to_string(o.send_timeout.count()) + " ms");
  }
  return Status::Ok();
}

std::string LastEndpoint(zmq::socket_t& socket) {
  return socket.get(zmq::sockopt::last_endpoint);
}

void WarnPlaintextOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::cerr << "lockstep: WARNING: insecure mode: tcp/ipc links are plaintext; any process "
                 "that can reach them can read, send and impersonate\n";
  });
}

// Checks this end's key pair: both valid and belonging together.
Status CheckKeyPair(const CurveKeyPair& own, const std::string& who) {
  if (own.public_z85.empty() || own.secret_z85.empty()) {
    return InvalidError(who + ": no CURVE key pair given (pass keys, or choose insecure "
                              "plaintext explicitly)");
  }
  LOCKSTEP_RETURN_IF_ERROR(ValidateCurveKey(own.public_z85, who + ": own public key"));
  LOCKSTEP_RETURN_IF_ERROR(ValidateCurveKey(own.secret_z85, who + ": own secret key"));
  std::array<char, 41> derived{};
  if (zmq_curve_public(derived.data(), own.secret_z85.c_str()) != 0 ||
      own.public_z85 != std::string(derived.data(), 40)) {
    return InvalidError(who + ": the public key does not belong to the secret key");
  }
  return Status::Ok();
}

// Applies CURVE server options; registers the allow-list with the
// context's ZAP handler before the socket binds.
Result<ZapDomain> SecureServer(zmq::context_t& context, zmq::socket_t& socket,
                               const std::string& endpoint, const LinkSecurity& sec) {
  if (IsInprocEndpoint(endpoint)) return ZapDomain();
  if (sec.insecure) {
    WarnPlaintextOnce();
    return ZapDomain();
  }
  const std::string who = "server " + endpoint;
  LOCKSTEP_RETURN_IF_ERROR(CheckKeyPair(sec.own, who));
  for (size_t i = 0; i < sec.allowed_clients_z85.size(); ++i) {
    LOCKSTEP_RETURN_IF_ERROR(ValidateCurveKey(sec.allowed_clients_z85[i],
                                              who + ": allowed client key #" + std::to_string(i + 1)));
  }
  LOCKSTEP_ASSIGN_OR_RETURN(std::shared_ptr<ZapHandler> zap, ZapHandler::For(context));
  ZapDomain domain(zap, zap->Register(sec.allowed_clients_z85));
  socket.set(zmq::sockopt::zap_domain, domain.domain());
  socket.set(zmq::sockopt::curve_server, 1);
  socket.set(zmq::sockopt::curve_secretkey, sec.own.secret_z85);
  return domain;
}

Status SecureClient(zmq::socket_t& socket, const std::string& endpoint, const LinkSecurity& sec) {
  if (IsInprocEndpoint(endpoint)) return Status::Ok();
  if (sec.insecure) {
    WarnPlaintextOnce();
    return Status::Ok();
  }
  const std::string who = "client of " + endpoint;
  LOCKSTEP_RETURN_IF_ERROR(CheckKeyPair(sec.own, who));
  if (sec.server_public_z85.empty()) {
    return InvalidError(who + ": no server public key to pin");
  }
  LOCKSTEP_RETURN_IF_ERROR(ValidateCurveKey(sec.server_public_z85, who + ": server public key"));
  socket.set(zmq::sockopt::curve_serverkey, sec.server_public_z85);
  socket.set(zmq::sockopt::curve_publickey, sec.own.public_z85);
  socket.set(zmq::sockopt::curve_secretkey, sec.own.secret_z85);
  return Status::Ok();
}

}  // namespace

// ---- Server -----------------------------------------------------------------

Server::Server(zmq::socket_t socket, std::string endpoint, TransportOptions options,
               ZapDomain zap)
    : zap_(std::move(zap)),
      socket_(std::move(socket)),
      endpoint_(std::move(endpoint)),
      options_(std::move(options)) {}

Result<Server> Server::Bind(zmq::context_t& context, const std::string& endpoint,
                            TransportOptions options) {
  LOCKSTEP_RETURN_IF_ERROR(ValidateEndpoint(endpoint, EndpointUse::kBind));
  try {
    zmq::socket_t socket(context, zmq::socket_type::router);
    socket.set(zmq::sockopt::router_mandatory, 1);
    ApplyCommonOptions(socket, options);
    LOCKSTEP_ASSIGN_OR_RETURN(ZapDomain zap,
                              SecureServer(context, socket, endpoint, options.security));
    socket.bind(endpoint);
    std::string resolved = LastEndpoint(socket);
    return Server(std::move(socket), std::move(resolved), std::move(options), std::move(zap));
  } catch (const zmq::error_t& e) {
    return FromZmqError(e.num(), "bind " + endpoint);
  }
}

Status Server::Send(std::string_view peer, std::span<const uint8_t> frame) {
  const std::string who = "to peer '" + std::string(peer) + "'";
  LOCKSTEP_RETURN_IF_ERROR(CheckSize(frame.size(), options_, who));
  try {
    if (!socket_.send(zmq::buffer(peer.data(), peer.size()), zmq::send_flags::sndmore)) {
      return TimeoutError("send " + who + " timed out");
    }
    return SendBody(socket_, frame, options_, who);
  } catch (const zmq::error_t& e) {
    return FromZmqError(e.num(), "send " + who);
  }
}

Result<Incoming> Server::Receive(milliseconds timeout) {
  LOCKSTEP_ASSIGN_OR_RETURN(auto parts, ReceiveParts(socket_, timeout));
  Incoming in;
  in.peer = parts[0].to_string();
  if (parts.size() != 2) {
    return CorruptError("message from peer '" + in.peer + "' has " +
                        std::to_string(parts.size() - 1) + " body parts, expected 1");
  }
  LOCKSTEP_RETURN_IF_ERROR(
      CheckSize(parts[1].size(), options_, "from peer '" + in.peer + "'"));
  in.body = std::move(parts[1]);
  if (zap_.active()) {
    const char* key = zmq_msg_gets(in.body.handle(), "User-Id");
    if (key == nullptr) return InternalError("CURVE message without an authenticated key");
    in.peer_key = key;
  }
  return in;
}

Status Server::AllowClient(const std::string& public_z85) {
  if (!zap_.active()) return InvalidError("server " + endpoint_ + " has no CURVE allow-list");
  LOCKSTEP_RETURN_IF_ERROR(ValidateCurveKey(public_z85, "allowed client key"));
  zap_.Allow(public_z85);
  return Status::Ok();
}

// ---- Client -----------------------------------------------------------------

Client::Client(zmq::socket_t socket, std::string identity, TransportOptions options)
    : socket_(std::move(socket)),
      identity_(std::move(identity)),
      options_(std::move(options)) {}

Result<Client> Client::Connect(zmq::context_t& context, const std::string& endpoint,
                               const std::string& identity,
                               TransportOptions options) {
  if (identity.empty() || identity.size() > 255 || identity[0] == '\0') {
    return InvalidError("client identity must be 1..255 bytes, not starting with 0");
  }
  LOCKSTEP_RETURN_IF_ERROR(ValidateEndpoint(endpoint, EndpointUse::kConnect));
  try {
    zmq::socket_t socket(context, zmq::socket_type::dealer);
    socket.set(zmq::sockopt::routing_id, identity);
    ApplyCommonOptions(socket, options);
    LOCKSTEP_RETURN_IF_ERROR(SecureClient(socket, endpoint, options.security));
    socket.connect(endpoint);
    return Client(std::move(socket), identity, std::move(options));
  } catch (const zmq::error_t& e) {
    return FromZmqError(e.num(), "connect " + endpoint);
  }
}

Status Client::Send(std::span<const uint8_t> frame) {
  LOCKSTEP_RETURN_IF_ERROR(CheckSize(frame.size(), options_, "to server"));
  try {
    return SendBody(socket_, frame, options_, "to server");
  } catch (const zmq::error_t& e) {
    return FromZmqError(e.num(), "send from '" + identity_ + "'");
  }
}

Result<Incoming> Client::Receive(milliseconds timeout) {
  LOCKSTEP_ASSIGN_OR_RETURN(auto parts, ReceiveParts(socket_, timeout));
  if (parts.size() != 1) {
    return CorruptError("message to '" + identity_ + "' has " +
                        std::to_string(parts.size()) + " parts, expected 1");
  }
  LOCKSTEP_RETURN_IF_ERROR(CheckSize(parts[0].size(), options_, "from server"));
  Incoming in;
  in.body = std::move(parts[0]);
  return in;
}

std::string UnguessableIdentity(const std::string& prefix) {
  std::random_device random;  // the OS's entropy source
  char suffix[17];
  std::snprintf(suffix, sizeof suffix, "%08x%08x", random(), random());
  return prefix + "-" + suffix;
}

// ---- Poll -------------------------------------------------------------------

Result<std::vector<bool>> PollReadable(std::span<zmq::socket_ref> sockets,
                                       milliseconds timeout) {
  std::vector<zmq_pollitem_t> items;
  items.reserve(sockets.size());
  for (zmq::socket_ref s : sockets) {
    items.push_back(zmq_pollitem_t{s.handle(), 0, ZMQ_POLLIN, 0});
  }
  std::vector<bool> readable(sockets.size(), false);
  const int rc = zmq_poll(items.data(), static_cast<int>(items.size()),
                          std::max<long>(0, timeout.count()));
  if (rc < 0) {
    if (zmq_errno() == EINTR) return readable;
    return FromZmqError(zmq_errno(), "poll");
  }
  for (size_t i = 0; i < items.size(); ++i) {
    readable[i] = (items[i].revents & ZMQ_POLLIN) != 0;
  }
  return readable;
}

}  // namespace lockstep::wire
