#include "engine/prefix.h"

#include <string>

namespace lockstep {
namespace {

Status CheckPrefixFits(const Stage& stage, const KvCache& prefix) {
  const StageSpec& spec = stage.spec();
  if (prefix.lo() != spec.lo || prefix.hi() != spec.hi) {
    return InvalidError("prefix cache holds layers [" + std::to_string(prefix.lo()) + ", " +
                        std::to_string(prefix.hi()) + ") but the stage runs [" +
                        std::to_string(spec.lo) + ", " + std::to_string(spec.hi) + ")");
  }
  const auto& c = stage.config();
  const size_t width = static_cast<size_t>(c.num_kv_heads) * static_cast<size_t>(c.head_dim);
  if (prefix.kv_width() != width) {
    return InvalidError("prefix cache rows are " + std::to_string(prefix.kv_width()) +
                        " floats wide but the stage's kv_heads*head_dim is " +
                        std::to_string(width));
  }
  const auto pos = prefix.positions();
  for (size_t e = 0; e < pos.size(); ++e) {
    if (pos[e] != static_cast<int64_t>(e)) {
      return InvalidError("prefix cache entry " + std::to_string(e) + " has position " +
                          std::to_string(pos[e]) + "; a session prefix must be numbered 0.." +
                          std::to_string(pos.size() - 1));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<LocalBackend> SessionFromPrefix(const Stage& stage, const KvCache& prefix,
                                       std::span<const uint32_t> suffix,
                                       std::vector<float>* logits) {
  if (suffix.empty()) return InvalidError("prefix reuse: the suffix has no tokens");
  LOCKSTEP_RETURN_IF_ERROR(CheckPrefixFits(stage, prefix).WithContext("prefix reuse"));
  LocalBackend session(stage, prefix.Clone());
  LOCKSTEP_RETURN_IF_ERROR(session.Feed(suffix, logits));
  return session;
}

}  // namespace lockstep
