// HttpServer: HTTP/1.1 on Boost.Beast over Boost.Asio. The acceptor and
// the SIGTERM/SIGINT handler run on the calling thread's io_context; each
// connection gets its own thread doing blocking reads and writes under
// deadlines (server/deadline_socket.h), so a slow or stalled client only
// ever blocks itself, and only until its deadline:
//   idle_timeout_ms    a kept-alive connection waiting for its next request;
//   header_timeout_ms  from a request's first byte to the end of its header;
//   body_timeout_ms    the whole body, after the header;
//   write_timeout_ms   a whole response, or one streamed event.
// A deadline that passes closes the connection. Limits: request bodies
// over max_body_bytes -> 413; more than max_connections open connections,
// or more than max_connections_per_client from one source address ->
// 429 with Retry-After, and closed (server/connection_limits.h).
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
  size_t max_connections_per_client = 64;  // one source address (at most max_connections)
  int idle_timeout_ms = 60000;
  int header_timeout_ms = 10000;
  int body_timeout_ms = 30000;
  int write_timeout_ms = 60000;
};

// Serves until a termination signal; then calls on_stop (which must make
// every in-flight request finish) and waits for all connections. Invalid
// when a limit or timeout is not positive.
// on_listening(port) runs once the socket is bound (readiness).
Status ServeHttp(const HttpOptions& options, Api& api,
                 const std::function<void(uint16_t)>& on_listening,
                 const std::function<void()>& on_stop);

}  // namespace lockstep::server
