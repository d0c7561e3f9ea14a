// Exchange: one HTTP request's way back to its client, as the API sees it
// (implemented by the HTTP server over a socket). Either Respond once, or
// BeginEvents and then SendEvent any number of times (server-sent
// events). A false return means the client is gone: stop and free.
#pragma once

#include <string>

namespace lockstep::server {

class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual bool Respond(int status, const std::string& content_type, const std::string& body,
                       int retry_after_s) = 0;
  virtual bool BeginEvents() = 0;
  virtual bool SendEvent(const std::string& data) = 0;  // one "data: ..." event
  // True once the peer is gone: reset, or hung up both ways (checked
  // without blocking). A peer that only half-closed its write side after
  // the request is still waiting for the answer: not gone.
  virtual bool PeerGone() = 0;
};

}  // namespace lockstep::server
