#include "wire/zap_handler.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstring>

#include <zmq.h>

namespace lockstep::wire {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

std::mutex g_registry_mu;
std::map<void*, std::weak_ptr<ZapHandler>>& Registry() {
  static auto* registry = new std::map<void*, std::weak_ptr<ZapHandler>>();
  return *registry;
}

std::string Z85Of(const std::string& raw) {
  std::array<char, 41> text{};
  zmq_z85_encode(text.data(), reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
  return std::string(text.data(), 40);
}

std::string RawOf(const std::string& z85) {
  std::array<uint8_t, 32> raw{};
  if (z85.size() != 40 || zmq_z85_decode(raw.data(), z85.c_str()) == nullptr) return {};
  return std::string(reinterpret_cast<const char*>(raw.data()), raw.size());
}

}  // namespace

Result<std::shared_ptr<ZapHandler>> ZapHandler::For(zmq::context_t& context) {
  std::lock_guard<std::mutex> lock(g_registry_mu);
  auto& registry = Registry();
  if (auto it = registry.find(context.handle()); it != registry.end()) {
    if (std::shared_ptr<ZapHandler> live = it->second.lock()) return live;
  }
  // A handler of this context that is just stopping may still hold the
  // endpoint for a moment: retry the bind briefly.
  zmq::socket_t socket(context, zmq::socket_type::rep);
  socket.set(zmq::sockopt::linger, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (;;) {
    try {
      socket.bind(kZapEndpoint);
      break;
    } catch (const zmq::error_t& e) {
      if (e.num() != EADDRINUSE || std::chrono::steady_clock::now() >= deadline) {
        return IoError(std::string("cannot start the CURVE authenticator: ") + e.what());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  std::shared_ptr<ZapHandler> handler(new ZapHandler());
  handler->stop_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (handler->stop_fd_ < 0) return IoError("cannot start the CURVE authenticator: eventfd failed");
  handler->thread_ = std::thread(
      [raw = handler.get(), s = std::move(socket)]() mutable { raw->Main(std::move(s)); });
  registry[context.handle()] = handler;
  return handler;
}

ZapHandler::~ZapHandler() {
  const uint64_t one = 1;
  if (stop_fd_ >= 0) (void)!write(stop_fd_, &one, sizeof one);
  if (thread_.joinable()) thread_.join();
  if (stop_fd_ >= 0) close(stop_fd_);
}

std::string ZapHandler::Register(const std::vector<std::string>& allowed_z85) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string domain = "lockstep-" + std::to_string(next_domain_++);
  std::set<std::string>& keys = allowed_[domain];
  for (const std::string& k : allowed_z85) {
    if (std::string raw = RawOf(k); !raw.empty()) keys.insert(std::move(raw));
  }
  return domain;
}

void ZapHandler::Allow(const std::string& domain, const std::string& key_z85) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allowed_.find(domain);
  if (it == allowed_.end()) return;
  if (std::string raw = RawOf(key_z85); !raw.empty()) it->second.insert(std::move(raw));
}

void ZapHandler::Unregister(const std::string& domain) {
  std::lock_guard<std::mutex> lock(mu_);
  allowed_.erase(domain);
}

std::vector<std::string> ZapHandler::Decide(const std::vector<zmq::message_t>& request) {
  // RFC 27: version, request id, domain, address, identity, mechanism,
  // credentials... (the REP socket has removed the envelope).
  if (request.size() < 6 || request[0].to_string() != "1.0") {
    return {"400", "malformed ZAP request", ""};
  }
  const std::string domain = request[2].to_string();
  const std::string mechanism = request[5].to_string();
  if (mechanism != "CURVE" || request.size() != 7 || request[6].size() != 32) {
    return {"400", "only CURVE clients are accepted", ""};
  }
  const std::string key = request[6].to_string();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allowed_.find(domain);
  if (it == allowed_.end() || it->second.count(key) == 0) {
    return {"400", "client key not allowed", ""};
  }
  return {"200", "OK", Z85Of(key)};
}

void ZapHandler::Main(zmq::socket_t socket) {
  for (;;) {
    zmq_pollitem_t items[2] = {{socket.handle(), 0, ZMQ_POLLIN, 0},
                               {nullptr, stop_fd_, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 2, -1) < 0) {
      if (zmq_errno() == EINTR) continue;
      return;  // ETERM: the context is going away
    }
    if (items[1].revents & ZMQ_POLLIN) return;
    if (!(items[0].revents & ZMQ_POLLIN)) continue;
    std::vector<zmq::message_t> request;
    try {
      for (;;) {
        zmq::message_t part;
        if (!socket.recv(part, zmq::recv_flags::dontwait)) break;
        const bool more = part.more();
        request.push_back(std::move(part));
        if (!more) break;
      }
      if (request.empty()) continue;
      const std::vector<std::string> decision = Decide(request);
      const std::string request_id = request.size() > 1 ? request[1].to_string() : "";
      socket.send(zmq::buffer(std::string("1.0")), zmq::send_flags::sndmore);
      socket.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
      socket.send(zmq::buffer(decision[0]), zmq::send_flags::sndmore);
      socket.send(zmq::buffer(decision[1]), zmq::send_flags::sndmore);
      socket.send(zmq::buffer(decision[2]), zmq::send_flags::sndmore);
      socket.send(zmq::message_t(), zmq::send_flags::none);  // no metadata
    } catch (const zmq::error_t&) {
      return;  // ETERM
    }
  }
}

}  // namespace lockstep::wire
