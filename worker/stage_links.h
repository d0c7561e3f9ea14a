// StageLinks: the links a worker opens to other stages — a DEALER to the
// next stage (hidden frames, forwarded control messages) and, on the last
// stage, one to the first (relayed steps). Each presents the worker's own
// key and pins the key the last Assign names for that stage.
//   - An Assign's links are checked when it is applied (admission.h,
//     CheckLink: a valid connect endpoint, and a key to pin unless the links
//     are plaintext or the endpoint is inproc) and connected at the first
//     frame for them: by then the coordinator has every stage's AssignAck,
//     so the other stage accepts this worker's key.
//   - A new Assign closes both links (a new next hop and ring hop).
//   - A frame that cannot be sent is Disconnected naming the stage and
//     endpoint; one for a link the assignment never named is refused as such.
// Thread-compatible: owned by the worker's I/O thread. The zmq context must
// outlive the links.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include <zmq.hpp>

#include "base/status.h"
#include "wire/transport.h"

namespace lockstep {

class StageLinks {
 public:
  // transport: the DEALERs' options (security: this worker's key pair);
  // insecure: the links are plaintext (no keys to pin).
  StageLinks(zmq::context_t& context, wire::TransportOptions transport, std::string worker_name,
             bool insecure);

  // A new assignment: both links closed and forgotten; the keys the next
  // and the first stage must present.
  void Reset(const std::string& next_key, const std::string& ring_key);
  // The next stage ("stage K") at `endpoint`, checked now.
  Status SetNext(const std::string& endpoint, const std::string& label);
  // The first stage at `endpoint` (last stage only), checked now.
  Status SetRing(const std::string& endpoint);

  // Sends `frame` to the next stage, connecting first if need be.
  Status SendNext(std::span<const uint8_t> frame);
  // Sends a relayed step to the first stage, connecting first if need be.
  Status SendRing(std::span<const uint8_t> frame);

  // Bytes sent to the next stage so far.
  uint64_t bytes_to_next() const { return bytes_to_next_; }
  // The links open now (at most 2) into links[]; returns how many. The
  // other stages never talk back on them: what arrives is dropped.
  size_t Open(wire::Client* links[2]);

 private:
  Result<wire::Client> Connect(const std::string& endpoint, const std::string& key,
                               const std::string& what) const;

  zmq::context_t& context_;
  wire::TransportOptions transport_;
  std::string worker_name_;
  bool insecure_;
  std::optional<wire::Client> next_;  // once a frame went to the next stage
  std::optional<wire::Client> ring_;  // once a relayed step went to the first
  std::string next_endpoint_;         // checked, connected at the first frame for it
  std::string next_label_;            // "stage K at ENDPOINT"
  std::string next_key_;              // the next stage's pinned CURVE key
  std::string ring_endpoint_;         // checked, connected at the first relayed step
  std::string ring_key_;              // the first stage's pinned CURVE key
  uint64_t bytes_to_next_ = 0;
};

}  // namespace lockstep
