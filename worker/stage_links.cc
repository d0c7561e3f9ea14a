#include "worker/stage_links.h"

#include "worker/admission.h"

namespace lockstep {

StageLinks::StageLinks(zmq::context_t& context, wire::TransportOptions transport,
                       std::string worker_name, bool insecure)
    : context_(context),
      transport_(std::move(transport)),
      worker_name_(std::move(worker_name)),
      insecure_(insecure) {}

void StageLinks::Reset(const std::string& next_key, const std::string& ring_key) {
  next_.reset();
  next_endpoint_.clear();
  ring_.reset();
  ring_endpoint_.clear();
  next_key_ = next_key;
  ring_key_ = ring_key;
}

Status StageLinks::SetNext(const std::string& endpoint, const std::string& label) {
  LOCKSTEP_RETURN_IF_ERROR(admission::CheckLink(endpoint, next_key_, "next stage", insecure_));
  next_endpoint_ = endpoint;
  next_label_ = label + " at " + endpoint;
  return Status::Ok();
}

Status StageLinks::SetRing(const std::string& endpoint) {
  LOCKSTEP_RETURN_IF_ERROR(admission::CheckLink(endpoint, ring_key_, "first stage", insecure_));
  ring_endpoint_ = endpoint;
  return Status::Ok();
}

Result<wire::Client> StageLinks::Connect(const std::string& endpoint, const std::string& key,
                                         const std::string& what) const {
  wire::TransportOptions transport = transport_;
  transport.security.server_public_z85 = key;
  return wire::Client::Connect(context_, endpoint,
                               wire::UnguessableIdentity(what + "-of-" + worker_name_), transport);
}

Status StageLinks::SendNext(std::span<const uint8_t> frame) {
  if (!next_ && !next_endpoint_.empty()) {
    Result<wire::Client> c = Connect(next_endpoint_, next_key_, "stage");
    if (!c.ok()) return c.status().WithContext("connect to next stage " + next_endpoint_);
    next_.emplace(std::move(c).value());
  }
  const Status st = next_ ? next_->Send(frame) : InternalError("no next stage connected");
  if (st.ok()) {
    bytes_to_next_ += frame.size();
    return st;
  }
  return DisconnectedError("cannot send to the next stage (" + next_label_ + "): " + st.message());
}

Status StageLinks::SendRing(std::span<const uint8_t> frame) {
  if (!ring_) {
    if (ring_endpoint_.empty()) {
      return InvalidError("a relayed step, but the assignment names no first stage to relay to");
    }
    Result<wire::Client> c = Connect(ring_endpoint_, ring_key_, "ring");
    if (!c.ok()) return c.status().WithContext("connect to the first stage " + ring_endpoint_);
    ring_.emplace(std::move(c).value());
  }
  const Status st = ring_->Send(frame);
  if (st.ok()) return st;
  return DisconnectedError("cannot relay to the first stage at " + ring_endpoint_ + ": " +
                           st.message());
}

size_t StageLinks::Open(wire::Client* links[2]) {
  size_t n = 0;
  for (std::optional<wire::Client>* link : {&next_, &ring_}) {
    if (*link) links[n++] = &**link;
  }
  return n;
}

}  // namespace lockstep
