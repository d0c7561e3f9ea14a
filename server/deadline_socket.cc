#include "server/deadline_socket.h"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include <boost/beast/core/error.hpp>

namespace lockstep::server {

DeadlineSocket::DeadlineSocket(boost::asio::ip::tcp::socket socket) : socket_(std::move(socket)) {
  boost::beast::error_code ignored;
  socket_.non_blocking(true, ignored);
}

bool DeadlineSocket::Wait(Direction d, boost::beast::error_code& ec) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - Clock::now());
    if (left.count() <= 0) {
      ec = boost::beast::error::timeout;
      return false;
    }
    pollfd p{socket_.native_handle(), static_cast<short>(d == kRead ? POLLIN : POLLOUT), 0};
    const int ready = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1 << 30)));
    if (ready > 0) return true;  // readable, writable, or an error the next call reports
    if (ready < 0 && errno != EINTR) {
      ec = boost::beast::error_code(errno, boost::system::system_category());
      return false;
    }
  }
}

}  // namespace lockstep::server
