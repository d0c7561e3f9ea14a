#include "server/http_server.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "server/connection_limits.h"
#include "server/deadline_socket.h"

namespace lockstep::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

class SocketExchange final : public Exchange {
 public:
  SocketExchange(DeadlineSocket& s, bool keep_alive, milliseconds write_timeout)
      : socket_(s), keep_alive_(keep_alive), write_timeout_(write_timeout) {}

  bool Respond(int status, const std::string& content_type, const std::string& body,
               int retry_after_s) override {
    http::response<http::string_body> res{static_cast<http::status>(status), 11};
    res.set(http::field::server, "lockstep");
    res.set(http::field::content_type, content_type);
    if (retry_after_s > 0) res.set(http::field::retry_after, std::to_string(retry_after_s));
    res.keep_alive(keep_alive_);
    res.body() = body;
    res.prepare_payload();
    beast::error_code ec;
    socket_.expires_after(write_timeout_);
    http::write(socket_, res, ec);
    return !ec;
  }

  bool BeginEvents() override {
    streaming_ = true;
    const std::string head =
        "HTTP/1.1 200 OK\r\nServer: lockstep\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
        "Cache-Control: no-cache\r\nConnection: close\r\n\r\n";
    return WriteAll(head);
  }

  bool SendEvent(const std::string& data) override { return WriteAll("data: " + data + "\n\n"); }

  // A client that half-closes its write side after the request (EOF on
  // read, POLLRDHUP) still waits for its answer, so EOF alone is not a
  // disconnect: only a reset or a hang-up in both directions is. A peer
  // that closed fully is found by the next write (its kernel answers RST).
  bool PeerGone() override {
    pollfd p{socket_.native_handle(), POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLHUP | POLLERR)) != 0;
  }

  bool streaming() const { return streaming_; }

 private:
  // One event, or the head: a client that reads nothing for write_timeout
  // is gone.
  bool WriteAll(const std::string& s) {
    beast::error_code ec;
    socket_.expires_after(write_timeout_);
    asio::write(socket_, asio::buffer(s), ec);
    return !ec;
  }
  DeadlineSocket& socket_;
  bool keep_alive_;
  milliseconds write_timeout_;
  bool streaming_ = false;
};

// Waits up to the idle timeout for the first byte of the next request
// (nothing to wait for when a pipelined one is buffered already): false
// when the client sent nothing, closed, or the server is stopping.
bool AwaitRequest(DeadlineSocket& socket, beast::flat_buffer& buffer, const HttpOptions& o) {
  if (buffer.size() > 0) return true;
  beast::error_code ec;
  socket.expires_after(milliseconds(o.idle_timeout_ms));
  const size_t n = socket.read_some(buffer.prepare(4096), ec);
  buffer.commit(n);
  return !ec && n > 0;
}

// The HTTP status a failed read of a request earns, or 0 to close without
// an answer (the client left, or stalled past a deadline).
int ReadFailureStatus(const beast::error_code& ec) {
  if (ec == http::error::body_limit) return 413;
  if (ec == http::error::end_of_stream || ec == http::error::partial_message ||
      ec == asio::error::eof || ec == asio::error::connection_reset ||
      ec == beast::error::timeout) {
    return 0;
  }
  return 400;
}

void ServeConnection(DeadlineSocket socket, Api& api, const HttpOptions& o) {
  const milliseconds write_timeout(o.write_timeout_ms);
  beast::flat_buffer buffer;
  while (AwaitRequest(socket, buffer, o)) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(o.max_body_bytes);
    parser.header_limit(64 * 1024);
    beast::error_code ec;
    socket.expires_after(milliseconds(o.header_timeout_ms));
    http::read_header(socket, buffer, parser, ec);
    if (!ec && !parser.is_done()) {
      socket.expires_after(milliseconds(o.body_timeout_ms));
      http::read(socket, buffer, parser, ec);
    }
    if (ec) {
      SocketExchange ex(socket, false, write_timeout);
      const int status = ReadFailureStatus(ec);
      if (status == 413) {
        api.Fail(ApiError{413, "request body exceeds " + std::to_string(o.max_body_bytes) + " bytes",
                          "invalid_request_error", "", "body_too_large"},
                 ex);
      } else if (status == 400) {
        api.Fail(ApiError{400, "malformed HTTP request: " + ec.message(), "invalid_request_error", "",
                          "bad_http"},
                 ex);
      }
      break;
    }
    const auto& req = parser.get();
    SocketExchange ex(socket, req.keep_alive(), write_timeout);
    api.Handle(std::string(req.method_string()), std::string(req.target()), req.body(), ex);
    if (ex.streaming() || !req.keep_alive()) break;
  }
  beast::error_code ignored;
  socket.socket().shutdown(tcp::socket::shutdown_both, ignored);
  socket.socket().close(ignored);
}

// Answers a connection the limits refused with 429 (one write that never
// blocks the accepting thread) and closes it.
void Refuse(tcp::socket socket, ConnectionLimits::Admit why, const HttpOptions& o, Api& api) {
  DeadlineSocket s(std::move(socket));
  s.expires_after(milliseconds(0));  // what the socket buffer takes now, nothing more
  SocketExchange ex(s, false, milliseconds(0));
  if (why == ConnectionLimits::Admit::kClientFull) {
    api.Fail(Overloaded("too many open connections from this client (max_connections_per_client " +
                            std::to_string(o.max_connections_per_client) + ")",
                        "max_connections_per_client"),
             ex);
  } else {
    api.Fail(Overloaded("too many open connections (max_connections " +
                            std::to_string(o.max_connections) + ")",
                        "max_connections"),
             ex);
  }
  beast::error_code ignored;
  s.socket().close(ignored);
}

std::string ClientOf(const tcp::socket& s) {
  beast::error_code ec;
  const tcp::endpoint peer = s.remote_endpoint(ec);
  return ec ? std::string("?") : peer.address().to_string();
}

Status CheckOptions(const HttpOptions& o) {
  if (o.max_connections == 0 || o.max_connections_per_client == 0) {
    return InvalidError("max_connections and max_connections_per_client must be positive");
  }
  if (o.idle_timeout_ms <= 0 || o.header_timeout_ms <= 0 || o.body_timeout_ms <= 0 ||
      o.write_timeout_ms <= 0) {
    return InvalidError("HTTP timeouts must be positive");
  }
  return Status::Ok();
}

}  // namespace

Status ServeHttp(const HttpOptions& o, Api& api, const std::function<void(uint16_t)>& on_listening,
                 const std::function<void()>& on_stop) {
  LOCKSTEP_RETURN_IF_ERROR(CheckOptions(o));
  asio::io_context io;
  tcp::acceptor acceptor(io);
  beast::error_code ec;
  const auto address = asio::ip::make_address(o.host, ec);
  if (ec) return InvalidError("--listen: '" + o.host + "' is not an IP address");
  tcp::endpoint ep(address, o.port);
  acceptor.open(ep.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(ep, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return IoError("cannot listen on " + o.host + ":" + std::to_string(o.port) + ": " + ec.message());

  ConnectionLimits limits(o.max_connections, std::min(o.max_connections_per_client, o.max_connections));
  std::mutex mu;
  std::set<int> fds;  // open connections, to end their reads at shutdown
  asio::signal_set signals(io, SIGTERM, SIGINT);
  bool stopping = false;
  signals.async_wait([&](const beast::error_code&, int) {
    stopping = true;
    beast::error_code ignored;
    acceptor.close(ignored);
  });

  std::function<void()> accept = [&] {
    acceptor.async_accept([&](const beast::error_code& aec, tcp::socket socket) {
      if (aec) {
        if (!stopping) accept();
        return;
      }
      const std::string client = ClientOf(socket);
      const ConnectionLimits::Admit admit = limits.TryOpen(client);
      if (admit != ConnectionLimits::Admit::kYes) {
        Refuse(std::move(socket), admit, o, api);
        accept();
        return;
      }
      const int fd = socket.native_handle();
      {
        std::lock_guard<std::mutex> l(mu);
        fds.insert(fd);
      }
      std::thread([&, client, fd, s = std::move(socket)]() mutable {
        try {
          ServeConnection(DeadlineSocket(std::move(s)), api, o);
        } catch (const std::exception& e) {  // one request's failure never ends the server
          std::cerr << "lockstep serve: connection dropped: " << e.what() << "\n";
        }
        {
          std::lock_guard<std::mutex> l(mu);
          fds.erase(fd);
        }
        limits.Close(client);
      }).detach();
      accept();
    });
  };
  accept();
  on_listening(acceptor.local_endpoint().port());
  io.run();
  api.SetShuttingDown();
  on_stop();  // every in-flight generation has its final event now
  {
    std::lock_guard<std::mutex> l(mu);
    for (int fd : fds) ::shutdown(fd, SHUT_RD);  // idle keep-alive reads end now
  }
  limits.WaitUntilNoneOpen();
  return Status::Ok();
}

}  // namespace lockstep::server
