#include "base/limits.h"

namespace lockstep {

uint32_t MaxPositions(const Limits& limits, int model_max) {
  if (model_max <= 0) return limits.max_positions;
  const uint32_t model = static_cast<uint32_t>(model_max);
  if (limits.max_positions == 0) return model;
  return limits.max_positions < model ? limits.max_positions : model;
}

Status OverLimit(ErrorKind kind, const std::string& name, const std::string& what,
                 uint64_t value, uint64_t limit) {
  return Status(kind, "limit " + name + ": " + what + " asks for " + std::to_string(value) +
                          ", over the limit of " + std::to_string(limit));
}

Status CheckLimit(ErrorKind kind, const std::string& name, const std::string& what,
                  uint64_t value, uint64_t limit) {
  if (value <= limit) return Status::Ok();
  return OverLimit(kind, name, what, value, limit);
}

Status PositionsOverLimit(const std::string& what, uint64_t reach, uint32_t bound) {
  return Status(ErrorKind::kInvalid,
                OverLimit(ErrorKind::kInvalid, "max_positions", what, reach, bound).message() +
                    " positions (the model's max_position_embeddings, or a lower max_positions)");
}

}  // namespace lockstep
