// ReachesListener: a worker's own endpoint under another name is still the
// worker (the next hop of a forwarding loop); anything else is not. The
// listeners are real sockets bound by wire::Server, so the bound endpoints
// are the ones a worker compares against.
#include "wire/self_endpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <vector>

#include <netdb.h>
#include <unistd.h>

#include "wire/transport.h"

namespace lockstep::wire {
namespace {

TransportOptions Plain() {
  TransportOptions o;
  o.security.insecure = true;
  return o;
}

std::string PortOf(const std::string& endpoint) {
  return endpoint.substr(endpoint.rfind(':') + 1);
}

TEST(ReachesListener, ALoopbackListenerIsReachedByItsNamesAndAddressesOnly) {
  zmq::context_t context(1);
  auto server = Server::Bind(context, "tcp://127.0.0.1:*", Plain());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string bound = server->endpoint();
  const std::string port = PortOf(bound);
  const std::string other = std::to_string(std::stoi(port) == 65535 ? 65534 : std::stoi(port) + 1);
  for (const std::string& self : {bound, "tcp://localhost:" + port, "tcp://127.0.0.1:" + port,
                                  "tcp://0.0.0.0:" + port}) {
    EXPECT_TRUE(ReachesListener(self, bound)) << self;
  }
  for (const std::string& not_self : std::vector<std::string>
       {"tcp://127.0.0.1:" + other, "tcp://localhost:" + other, "tcp://127.0.0.2:" + port,
        "tcp://192.0.2.1:" + port, "tcp://no-such-host.invalid:" + port, "ipc:///tmp/x.sock",
        "inproc://x"}) {
    EXPECT_FALSE(ReachesListener(not_self, bound)) << not_self;
  }
}

TEST(ReachesListener, AListenerOnEveryInterfaceIsReachedByEveryLocalAddress) {
  zmq::context_t context(1);
  auto server = Server::Bind(context, "tcp://0.0.0.0:*", Plain());
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string bound = server->endpoint();
  const std::string port = PortOf(bound);
  for (const std::string& self : {"tcp://localhost:" + port, "tcp://127.0.0.1:" + port,
                                  "tcp://127.0.0.2:" + port, "tcp://0.0.0.0:" + port}) {
    EXPECT_TRUE(ReachesListener(self, bound)) << self;
  }
  char host[256] = {};
  addrinfo* found = nullptr;
  if (gethostname(host, sizeof(host) - 1) == 0 &&
      getaddrinfo(host, nullptr, nullptr, &found) == 0) {  // this host's own name resolves
    freeaddrinfo(found);
    EXPECT_TRUE(ReachesListener("tcp://" + std::string(host) + ":" + port, bound)) << host;
  }
  EXPECT_FALSE(ReachesListener("tcp://192.0.2.1:" + port, bound));  // TEST-NET-1: not here
  EXPECT_FALSE(ReachesListener("tcp://localhost:1", bound));
}

TEST(ReachesListener, AnIpcListenerIsReachedByItsFileUnderAnyPath) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("lockstep-self-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir + "/sub");
  {
    zmq::context_t context(1);
    auto server = Server::Bind(context, "ipc://" + dir + "/w.sock", Plain());
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    const std::string bound = server->endpoint();
    for (const std::string& self :
         {bound, "ipc://" + dir + "/./w.sock", "ipc://" + dir + "/sub/../w.sock"}) {
      EXPECT_TRUE(ReachesListener(self, bound)) << self;
    }
    std::filesystem::create_symlink(dir + "/w.sock", dir + "/link.sock");
    EXPECT_TRUE(ReachesListener("ipc://" + dir + "/link.sock", bound));
    EXPECT_FALSE(ReachesListener("ipc://" + dir + "/other.sock", bound));
    EXPECT_FALSE(ReachesListener("tcp://127.0.0.1:5555", bound));
  }
  std::filesystem::remove_all(dir);
}

TEST(ReachesListener, InprocNamesAreCompared) {
  EXPECT_TRUE(ReachesListener("inproc://w0", "inproc://w0"));
  EXPECT_FALSE(ReachesListener("inproc://w1", "inproc://w0"));
  EXPECT_FALSE(ReachesListener("not an endpoint", "inproc://w0"));
}

}  // namespace
}  // namespace lockstep::wire
