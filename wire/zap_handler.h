// ZapHandler: the ZAP (ZeroMQ RFC 27) authenticator of one zmq context. A
// CURVE server socket asks it, during each handshake and before any frame
// of the client is delivered, whether the client's public key is allowed;
// every server registers its own allow-list under its own ZAP domain.
// Unknown domains and keys are refused (status 400); an accepted client's
// messages carry its Z85 public key as the "User-Id" property.
//
// One handler per context (libzmq allows one bind of inproc://zeromq.zap.01
// per context): For() returns the live one or starts it; it stops when the
// last shared_ptr (held by the servers) goes, which is before the context
// is terminated because servers must not outlive their context.
//
// Thread-safety: all methods are thread-safe; the handler answers on its
// own thread, which owns its socket.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "base/status.h"

namespace lockstep::wire {

class ZapHandler {
 public:
  static Result<std::shared_ptr<ZapHandler>> For(zmq::context_t& context);
  ~ZapHandler();
  ZapHandler(const ZapHandler&) = delete;
  ZapHandler& operator=(const ZapHandler&) = delete;

  // A new domain accepting exactly `allowed_z85` (keys already validated).
  std::string Register(const std::vector<std::string>& allowed_z85);
  // Adds one key to a domain's allow-list (e.g. an upstream stage).
  void Allow(const std::string& domain, const std::string& key_z85);
  void Unregister(const std::string& domain);

 private:
  ZapHandler() = default;
  void Main(zmq::socket_t socket);
  // The reply for one request: {status code, text, user id}.
  std::vector<std::string> Decide(const std::vector<zmq::message_t>& request);

  std::mutex mu_;
  std::map<std::string, std::set<std::string>> allowed_;  // domain -> raw 32-byte keys
  uint64_t next_domain_ = 0;
  int stop_fd_ = -1;
  std::thread thread_;
};

// One server's registration: unregisters its domain when destroyed.
// Empty (no handler) for plaintext and inproc servers. Move-only.
class ZapDomain {
 public:
  ZapDomain() = default;
  ZapDomain(std::shared_ptr<ZapHandler> handler, std::string domain)
      : handler_(std::move(handler)), domain_(std::move(domain)) {}
  ZapDomain(ZapDomain&& o) noexcept
      : handler_(std::move(o.handler_)), domain_(std::move(o.domain_)) {
    o.handler_.reset();
  }
  ZapDomain& operator=(ZapDomain&& o) noexcept {
    if (this != &o) {
      Reset();
      handler_ = std::move(o.handler_);
      domain_ = std::move(o.domain_);
      o.handler_.reset();
    }
    return *this;
  }
  ~ZapDomain() { Reset(); }

  bool active() const { return handler_ != nullptr; }
  const std::string& domain() const { return domain_; }
  void Allow(const std::string& key_z85) {
    if (handler_) handler_->Allow(domain_, key_z85);
  }

 private:
  void Reset() {
    if (handler_) handler_->Unregister(domain_);
    handler_.reset();
  }
  std::shared_ptr<ZapHandler> handler_;
  std::string domain_;
};

}  // namespace lockstep::wire
