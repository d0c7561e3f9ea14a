// DeadlineSocket: a connected TCP socket whose reads and writes fail once
// a deadline passes, for a thread that serves one HTTP connection with
// blocking calls. It is Beast's SyncReadStream and SyncWriteStream (so
// http::read_header, http::read, http::write and asio::write run over it)
// on a non-blocking descriptor: read_some and write_some wait with poll()
// at most until the deadline set by expires_after, then fail with
// beast::error::timeout. So a deadline bounds a whole phase (every byte of
// a request's header, a whole response), not each call: a client sending
// one byte a second cannot hold the connection past its deadline, unlike
// SO_RCVTIMEO, which also has no effect under Asio's blocking reads.
// Not thread-safe: one thread owns it. Move-only (owns the socket).
#pragma once

#include <chrono>
#include <cstddef>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/error.hpp>
#include <boost/system/system_error.hpp>

namespace lockstep::server {

class DeadlineSocket {
 public:
  using executor_type = boost::asio::ip::tcp::socket::executor_type;
  using Clock = std::chrono::steady_clock;

  // Takes the socket and makes it non-blocking. No deadline until
  // expires_after.
  explicit DeadlineSocket(boost::asio::ip::tcp::socket socket);

  // Reads and writes from now on fail with beast::error::timeout once
  // `limit` has passed.
  void expires_after(std::chrono::milliseconds limit) { deadline_ = Clock::now() + limit; }

  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers, boost::beast::error_code& ec) {
    return Retry(kRead, ec, [&] { return socket_.read_some(buffers, ec); });
  }
  template <class ConstBuffers>
  size_t write_some(const ConstBuffers& buffers, boost::beast::error_code& ec) {
    return Retry(kWrite, ec, [&] { return socket_.write_some(buffers, ec); });
  }
  template <class MutableBuffers>
  size_t read_some(const MutableBuffers& buffers) {
    boost::beast::error_code ec;
    const size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }
  template <class ConstBuffers>
  size_t write_some(const ConstBuffers& buffers) {
    boost::beast::error_code ec;
    const size_t n = write_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

  executor_type get_executor() { return socket_.get_executor(); }
  boost::asio::ip::tcp::socket& socket() { return socket_; }
  int native_handle() { return socket_.native_handle(); }

 private:
  enum Direction { kRead, kWrite };
  // Runs `op` until it does not report would_block, waiting for the socket
  // in between; timeout once the deadline has passed.
  template <class Op>
  size_t Retry(Direction d, boost::beast::error_code& ec, Op op) {
    for (;;) {
      const size_t n = op();
      if (ec != boost::asio::error::would_block && ec != boost::asio::error::try_again) return n;
      if (!Wait(d, ec)) return 0;
    }
  }
  // Waits until the socket is ready for `d`: false with ec set when the
  // deadline passes first or poll fails.
  bool Wait(Direction d, boost::beast::error_code& ec);

  boost::asio::ip::tcp::socket socket_;
  Clock::time_point deadline_ = Clock::time_point::max();
};

}  // namespace lockstep::server
