#include "coordinator/assign_reply.h"

#include <variant>

namespace lockstep {
namespace {

Status CompareDigest(const std::string& who, const char* what, const Digest& theirs,
                     const Digest& ours) {
  if (theirs == ours) return Status::Ok();
  return MismatchError(who + " refused: its " + what + " is " + ToHex(theirs) +
                       ", the coordinator's is " + ToHex(ours));
}

Status CheckHello(const std::string& who, const wire::Hello& h, const WitnessSeed& seed) {
  if (h.protocol_version != wire::kProtocolVersion) {
    return MismatchError(who + " refused: protocol version " +
                         std::to_string(h.protocol_version) + ", the coordinator speaks " +
                         std::to_string(wire::kProtocolVersion));
  }
  LOCKSTEP_RETURN_IF_ERROR(
      CompareDigest(who, "weights_sha256", h.weights_sha256, seed.weights_sha256));
  LOCKSTEP_RETURN_IF_ERROR(CompareDigest(who, "config_sha256", h.config_sha256, seed.config_sha256));
  LOCKSTEP_RETURN_IF_ERROR(
      CompareDigest(who, "tokenizer_sha256", h.tokenizer_sha256, seed.tokenizer_sha256));
  LOCKSTEP_RETURN_IF_ERROR(CompareDigest(who, "table_digest", h.table_digest, seed.table_digest));
  return CompareDigest(who, "inv_freq_table_digest", h.inv_freq_table_digest,
                       seed.inv_freq_table_digest);
}

}  // namespace

bool IsAssignReply(const wire::Message& m) {
  const auto* err = std::get_if<wire::ErrorReport>(&m);
  return std::holds_alternative<wire::Hello>(m) || std::holds_alternative<wire::AssignAck>(m) ||
         (err != nullptr && !err->has_session);
}

Status CheckAssignReply(const std::string& who, size_t index, const StageSpec& spec,
                        const WitnessSeed& seed, const wire::Message& m, bool* hello_seen,
                        bool* acked) {
  if (const auto* hello = std::get_if<wire::Hello>(&m)) {
    LOCKSTEP_RETURN_IF_ERROR(CheckHello(who, *hello, seed));
    *hello_seen = true;
  } else if (const auto* err = std::get_if<wire::ErrorReport>(&m)) {
    if (!err->has_session) {
      return Status(err->kind, who + " refused the assignment: " + err->message);
    }
  } else if (const auto* ack = std::get_if<wire::AssignAck>(&m)) {
    if (!*hello_seen) return InvalidError(who + " acknowledged without a Hello");
    if (ack->worker_index != index || ack->layer_lo != static_cast<uint32_t>(spec.lo) ||
        ack->layer_hi != static_cast<uint32_t>(spec.hi)) {
      return InvalidError(who + " acknowledged a different assignment");
    }
    *acked = true;
  }
  return Status::Ok();
}

}  // namespace lockstep
