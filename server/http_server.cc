#include "server/http_server.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <atomic>
#include <condition_variable>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace lockstep::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class SocketExchange final : public Exchange {
 public:
  SocketExchange(tcp::socket& s, bool keep_alive) : socket_(s), keep_alive_(keep_alive) {}

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
  bool WriteAll(const std::string& s) {
    beast::error_code ec;
    asio::write(socket_, asio::buffer(s), ec);
    return !ec;
  }
  tcp::socket& socket_;
  bool keep_alive_;
  bool streaming_ = false;
};

void SetTimeouts(tcp::socket& s, int seconds) {
  timeval tv{seconds, 0};
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(s.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

void ServeConnection(tcp::socket socket, Api& api, const HttpOptions& o) {
  SetTimeouts(socket, o.io_timeout_s);
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(o.max_body_bytes);
    parser.header_limit(64 * 1024);
    beast::error_code ec;
    http::read(socket, buffer, parser, ec);
    if (ec == http::error::body_limit) {
      SocketExchange ex(socket, false);
      api.Fail(ApiError{413, "request body exceeds " + std::to_string(o.max_body_bytes) + " bytes",
                        "invalid_request_error", "", "body_too_large"},
               ex);
      break;
    }
    if (ec == http::error::end_of_stream || ec) {
      if (ec && ec != http::error::end_of_stream && ec != asio::error::eof &&
          ec != asio::error::connection_reset && ec != asio::error::would_block &&
          ec != asio::error::try_again && ec != asio::error::timed_out && buffer.size() > 0) {
        SocketExchange ex(socket, false);
        api.Fail(ApiError{400, "malformed HTTP request: " + ec.message(), "invalid_request_error",
                          "", "bad_http"},
                 ex);
      }
      break;
    }
    const auto& req = parser.get();
    SocketExchange ex(socket, req.keep_alive());
    api.Handle(std::string(req.method_string()), std::string(req.target()), req.body(), ex);
    if (ex.streaming() || !req.keep_alive()) break;
  }
  beast::error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  socket.close(ignored);
}

}  // namespace

Status ServeHttp(const HttpOptions& o, Api& api, const std::function<void(uint16_t)>& on_listening,
                 const std::function<void()>& on_stop) {
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

  std::mutex mu;
  std::condition_variable cv;
  size_t open = 0;
  std::set<int> fds;  // open connections, to wake their blocked reads at shutdown
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
      {
        std::unique_lock<std::mutex> l(mu);
        if (open >= o.max_connections) {
          l.unlock();
          SetTimeouts(socket, 2);
          SocketExchange ex(socket, false);
          api.Fail(Overloaded("too many open connections (max_connections " +
                                  std::to_string(o.max_connections) + ")",
                              "max_connections"),
                   ex);
          beast::error_code ignored;
          socket.close(ignored);
          accept();
          return;
        }
        ++open;
        fds.insert(socket.native_handle());
      }
      std::thread([&, s = std::move(socket)]() mutable {
        const int fd = s.native_handle();
        try {
          ServeConnection(std::move(s), api, o);
        } catch (const std::exception& e) {  // one request's failure never ends the server
          std::cerr << "lockstep serve: connection dropped: " << e.what() << "\n";
        }
        std::lock_guard<std::mutex> l(mu);
        fds.erase(fd);
        --open;
        cv.notify_all();
      }).detach();
      accept();
    });
  };
  accept();
  on_listening(acceptor.local_endpoint().port());
  io.run();
  api.SetShuttingDown();
  on_stop();  // every in-flight generation has its final event now
  std::unique_lock<std::mutex> l(mu);
  for (int fd : fds) ::shutdown(fd, SHUT_RD);  // idle keep-alive reads end now
  cv.wait(l, [&] { return open == 0; });
  return Status::Ok();
}

}  // namespace lockstep::server
