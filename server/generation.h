// One generation as the server runs it, and the channel its tokens travel
// through from the scheduler thread to the connection that asked for it.
//
// The scheduler pushes every chosen token and one final event; it never
// waits for the consumer, so a slow or stalled client only delays itself.
// The consumer (a connection thread) may Cancel at any time (the client
// left); the scheduler then drops the session and its KV at its next step.
// Thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/decode.h"
#include "engine/sampling.h"

namespace lockstep::server {

// A request as the scheduler runs it: the decode (validated by
// ValidateDecodeRequest before it gets here; `request.gen` is max_tokens,
// `request.window` the window) and what only a server does with it.
struct GenerationSpec {
  DecodeRequest request;
  std::vector<std::string> stop;  // stop strings (need a tokenizer)
  bool determinism_check = false;  // §12.4: run twice, compare every digest
  // Exact speculative decoding (engine/speculative.h): the same tokens and
  // digests; the receipt's options.speculative says it ran so.
  bool speculative = false;
};

struct Finish {
  std::string reason;  // "stop", "length", "cancelled", "error"
  std::string error;   // reason == "error": what went wrong
  DecodeResult result;  // prompt, generated (incl. an EOS), digests
  std::optional<bool> determinism_ok;  // set iff determinism_check
  uint32_t prefix_reused = 0;          // prompt tokens taken from the prefix cache
  // The request was refused for capacity after it was queued (a worker's
  // session or KV limit): the client gets 429 with Retry-After, not 500.
  bool overloaded = false;
};

class GenerationStream {
 public:
  // Scheduler side.
  void PushToken(uint32_t token);
  void Close(Finish finish);

  // Consumer side: waits up to `timeout` for news; moves new tokens into
  // *tokens and the final event (once) into *finish. False on timeout.
  bool Wait(std::chrono::milliseconds timeout, std::vector<uint32_t>* tokens,
            std::optional<Finish>* finish);
  void Cancel();
  bool cancelled() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint32_t> tokens_;
  std::optional<Finish> finish_;
  bool cancelled_ = false;
};

}  // namespace lockstep::server
