// ConnectionLimits: which HTTP connections the server takes. At most
// `total` are open at once, and at most `per_client` from one client (one
// source address), so that one client opening connections and leaving
// them idle or slow cannot use up the server: with per_client < total
// every other client still gets in. A refused connection is answered 429
// and closed by the caller.
// Thread-safe (one mutex); Close must pair with each TryOpen that said
// kYes, with the same client.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <map>
#include <mutex>
#include <string>

namespace lockstep::server {

class ConnectionLimits {
 public:
  enum class Admit { kYes, kClientFull, kServerFull };

  // REQUIRES: 0 < per_client <= total.
  ConnectionLimits(size_t total, size_t per_client) : total_(total), per_client_(per_client) {}

  Admit TryOpen(const std::string& client);
  void Close(const std::string& client);
  size_t open() const;
  size_t open_from(const std::string& client) const;
  // Blocks until every admitted connection is closed.
  void WaitUntilNoneOpen();

 private:
  const size_t total_, per_client_;
  mutable std::mutex mu_;
  std::condition_variable none_open_;
  size_t open_ = 0;
  std::map<std::string, size_t, std::less<>> by_client_;  // clients with a connection open
};

}  // namespace lockstep::server
