// HttpServer: HTTP/1.1 on Boost.Beast over Boost.Asio. The acceptor and
// the SIGTERM/SIGINT handler run on the calling thread's io_context; each
// connection gets its own thread doing blocking reads and writes with
// socket timeouts, so a slow or stalled client only ever blocks itself.
// Limits: request bodies over max_body_bytes -> 413; more than
// max_connections open connections -> 429 with Retry-After.
// Shutdown on SIGTERM/SIGINT: stop accepting, answer new requests on open
// connections with 503, let the scheduler finish (or cancel with a final
// event) what is in flight, wait for every connection, then return.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"
#include "server/api.h"

namespace lockstep::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8080;  // 0: any free port (printed)
  size_t max_body_bytes = 1 << 20;
  size_t max_connections = 256;
  int io_timeout_s = 60;  // a read or write stalled this long drops the connection
};

// Serves until a termination signal; then calls on_stop (which must make
// every in-flight request finish) and waits for all connections.
// on_listening(port) runs once the socket is bound (readiness).
Status ServeHttp(const HttpOptions& options, Api& api,
                 const std::function<void(uint16_t)>& on_listening,
                 const std::function<void()>& on_stop);

}  // namespace lockstep::server
