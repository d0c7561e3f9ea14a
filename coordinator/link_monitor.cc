#include "coordinator/link_monitor.h"

#include <atomic>
#include <cstring>

#include "wire/link_security.h"

namespace lockstep {
namespace {

std::atomic<uint64_t> g_next_monitor{0};

}  // namespace

Result<LinkMonitor> LinkMonitor::Attach(zmq::context_t& context, zmq::socket_ref socket,
                                        const std::string& endpoint, const std::string& pinned) {
  const std::string address =
      "inproc://lockstep-link-monitor-" + std::to_string(g_next_monitor.fetch_add(1));
  const int events = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_SUCCEEDED |
                     ZMQ_EVENT_DISCONNECTED;
  if (zmq_socket_monitor(socket.handle(), address.c_str(), events) != 0) {
    return IoError("cannot monitor the link to " + endpoint + ": " + zmq_strerror(zmq_errno()));
  }
  try {
    zmq::socket_t pair(context, zmq::socket_type::pair);
    pair.set(zmq::sockopt::linger, 0);
    pair.connect(address);
    return LinkMonitor(std::move(pair), socket.handle(), pinned);
  } catch (const zmq::error_t& e) {
    zmq_socket_monitor(socket.handle(), nullptr, 0);
    return IoError("cannot monitor the link to " + endpoint + ": " + e.what());
  }
}

LinkMonitor::LinkMonitor(LinkMonitor&& other) noexcept
    : pair_(std::move(other.pair_)),
      monitored_(std::exchange(other.monitored_, nullptr)),
      pinned_(std::move(other.pinned_)),
      disconnected_(other.disconnected_),
      closed_handshakes_(other.closed_handshakes_) {}

LinkMonitor& LinkMonitor::operator=(LinkMonitor&& other) noexcept {
  if (this != &other) {
    pair_ = std::move(other.pair_);
    monitored_ = std::exchange(other.monitored_, nullptr);
    pinned_ = std::move(other.pinned_);
    disconnected_ = other.disconnected_;
    closed_handshakes_ = other.closed_handshakes_;
  }
  return *this;
}

void LinkMonitor::Stop() {
  if (monitored_ != nullptr) zmq_socket_monitor(monitored_, nullptr, 0);
  monitored_ = nullptr;
}

Status LinkMonitor::Check() {
  for (;;) {
    zmq::message_t head, address;
    if (!pair_.recv(head, zmq::recv_flags::dontwait)) return Status::Ok();
    if (!head.more() || !pair_.recv(address, zmq::recv_flags::dontwait)) return Status::Ok();
    if (head.size() < 6) continue;
    uint16_t event = 0;
    uint32_t value = 0;
    std::memcpy(&event, head.data(), 2);
    std::memcpy(&value, static_cast<const char*>(head.data()) + 2, 4);
    const std::string peer = address.to_string();
    if (event == ZMQ_EVENT_DISCONNECTED) {
      disconnected_ = true;
      continue;
    }
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      closed_handshakes_ = 0;
      continue;
    }
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
      // Once may be a worker that exited mid-handshake; twice in a row is
      // a worker that cannot read what was sealed for the pinned key.
      if (++closed_handshakes_ < 2) continue;
      return MismatchError(
          "worker " + peer + " closed the connection in two CURVE handshakes in a row: its key is not "
          "the key pinned for it" + (pinned_.empty() ? "" : " (" + wire::KeyLabel(pinned_) + ")") +
          "; check that worker's public key in the config's worker_keys (or spares)");
    }
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
      return InvalidError("worker " + peer + " refused this coordinator's key (authentication "
                          "failed, ZAP status " + std::to_string(value) +
                          "): add the coordinator's public key to the worker's --allow list");
    }
    return InvalidError("the CURVE handshake with worker " + peer +
                        " failed (protocol error " + std::to_string(value) +
                        "): a wrong key pinned for it, or not a lockstep worker");
  }
}

}  // namespace lockstep
