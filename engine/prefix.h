// Prefix reuse: start a session from a cached prompt prefix instead of
// recomputing it. The prefix cache is cloned (KvCache::Clone, byte-exact),
// so the same prefix can seed many sessions and is never modified; only
// the suffix runs through the stage. The result is bit-identical to
// feeding prefix + suffix to a fresh session (logits, cache, and every
// later step), because the forward pass of a position reads nothing but
// the cached rows of the positions before it.
// Stateless; thread-safe as long as `prefix` is not mutated concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/kv_cache.h"
#include "engine/local_backend.h"
#include "engine/stage.h"

namespace lockstep {

// Clones `prefix`, feeds `suffix` at positions [prefix.size(), ...) and
// returns the session; *logits is the last suffix position's [vocab].
// Invalid if the suffix is empty, if `prefix` was not built for this
// stage's layers and shape, or if its positions are not 0..size()-1
// (the numbering a LocalBackend session uses).
// REQUIRES: stage is first and last (a monolithic stage); `stage` must
// outlive the returned backend.
Result<LocalBackend> SessionFromPrefix(const Stage& stage, const KvCache& prefix,
                                       std::span<const uint32_t> suffix,
                                       std::vector<float>* logits);

}  // namespace lockstep
