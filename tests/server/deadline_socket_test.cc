// DeadlineSocket: a deadline bounds a whole read or write, however the peer
// trickles or stalls, and data that arrives in time is read whole.
#include "server/deadline_socket.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include <boost/asio.hpp>

namespace lockstep::server {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A loopback connection: `served` is the accepted end, `peer` the client.
struct Pair {
  asio::io_context io;
  tcp::socket peer{io}, served{io};
  Pair() {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    peer.connect(acceptor.local_endpoint());
    acceptor.accept(served);
  }
};

double SecondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

TEST(DeadlineSocket, APeerTricklingBytesIsCutAtTheDeadlineOfTheWholeRead) {
  Pair p;
  std::thread trickle([&] {
    for (int i = 0; i < 30; ++i) {  // one byte every 100 ms: 3 s for 30
      boost::system::error_code ec;
      asio::write(p.peer, asio::buffer("x", 1), ec);
      if (ec) return;
      std::this_thread::sleep_for(milliseconds(100));
    }
  });
  DeadlineSocket s(std::move(p.served));
  std::vector<char> want(30);
  boost::beast::error_code ec;
  const auto t0 = Clock::now();
  s.expires_after(milliseconds(500));
  const size_t got = asio::read(s, asio::buffer(want), ec);
  const double took = SecondsSince(t0);
  EXPECT_EQ(ec, boost::beast::error::timeout);
  EXPECT_GT(got, 0u);
  EXPECT_LT(got, 30u);
  EXPECT_GE(took, 0.45);
  EXPECT_LT(took, 2.0);
  s.socket().close();
  trickle.join();
}

TEST(DeadlineSocket, APeerThatReadsNothingIsCutAtTheWriteDeadline) {
  Pair p;
  DeadlineSocket s(std::move(p.served));
  const std::vector<char> lots(size_t{64} << 20, 'y');  // more than any socket buffer
  boost::beast::error_code ec;
  const auto t0 = Clock::now();
  s.expires_after(milliseconds(300));
  const size_t sent = asio::write(s, asio::buffer(lots), ec);
  EXPECT_EQ(ec, boost::beast::error::timeout);
  EXPECT_LT(sent, lots.size());
  EXPECT_LT(SecondsSince(t0), 3.0);
}

TEST(DeadlineSocket, DataThatArrivesInTimeIsReadWhole) {
  Pair p;
  DeadlineSocket s(std::move(p.served));
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(100));
    asio::write(p.peer, asio::buffer("hello", 5));
  });
  char got[5] = {};
  boost::beast::error_code ec;
  s.expires_after(milliseconds(5000));
  EXPECT_EQ(asio::read(s, asio::buffer(got), ec), 5u);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(std::string(got, 5), "hello");
  later.join();
}

}  // namespace
}  // namespace lockstep::server
