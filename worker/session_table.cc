#include "worker/session_table.h"

#include <algorithm>
#include <bit>
#include <climits>

namespace lockstep {
namespace {

using step_rules::StepName;

SamplingParams FromWire(const wire::Sampling& w) {
  return SamplingParams{std::bit_cast<float>(w.temperature_bits), w.top_k,
                        std::bit_cast<float>(w.top_p_bits), w.seed};
}

// Sets each of the cache's layers' window from the SessionOpen's spec.
Status SetWindows(const wire::WindowSpec& w, int num_layers, KvCache& cache) {
  if (w.kind == wire::WindowSpec::Kind::kPerLayer &&
      w.per_layer.size() != static_cast<size_t>(num_layers)) {
    return InvalidError("window list has " + std::to_string(w.per_layer.size()) +
                        " entries for a model of " + std::to_string(num_layers) + " layers");
  }
  for (int l = cache.lo(); l < cache.hi(); ++l) {
    uint32_t window = 0;
    if (w.kind == wire::WindowSpec::Kind::kGlobal) window = w.global;
    if (w.kind == wire::WindowSpec::Kind::kPerLayer) window = w.per_layer[static_cast<size_t>(l)];
    if (window > static_cast<uint32_t>(INT32_MAX)) return InvalidError("window too large");
    LOCKSTEP_RETURN_IF_ERROR(cache.SetWindow(l, static_cast<int>(window)));
  }
  return Status::Ok();
}

}  // namespace

uint64_t SessionOfMessage(const wire::Message& m, bool* has) {
  *has = true;
  if (auto* p = std::get_if<wire::SessionOpen>(&m)) return p->session_id;
  if (auto* p = std::get_if<wire::TokenInput>(&m)) return p->session_id;
  if (auto* p = std::get_if<wire::HiddenFrame>(&m)) return p->session_id;
  if (auto* p = std::get_if<wire::Evict>(&m)) return p->session_id;
  if (auto* p = std::get_if<wire::Fork>(&m)) return p->new_session_id;
  if (auto* p = std::get_if<wire::Release>(&m)) return p->session_id;
  *has = false;
  return 0;
}

uint32_t StepOfMessage(const wire::Message& m) {
  if (auto* p = std::get_if<wire::TokenInput>(&m)) return p->step;
  if (auto* p = std::get_if<wire::HiddenFrame>(&m)) return p->step;
  return 0;
}

uint64_t SessionTable::entries() const {
  uint64_t n = 0;
  for (const auto& [id, s] : sessions_) n += s.cache.size();
  return n;
}

Result<StageSession*> SessionTable::Find(uint64_t session_id) {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) {
    return InvalidError("unknown session " + std::to_string(session_id));
  }
  if (!it->second.failed.ok()) {
    return Status(it->second.failed.kind(), "session " + std::to_string(session_id) +
                                                " failed earlier: " + it->second.failed.message());
  }
  return &it->second;
}

bool SessionTable::IsTraced(uint64_t session_id) const {
  auto it = sessions_.find(session_id);
  return it != sessions_.end() && it->second.trace;
}

Result<uint64_t> SessionTable::Open(const wire::SessionOpen& m, KvCache cache) {
  if (sessions_.count(m.session_id)) {
    return InvalidError("session " + std::to_string(m.session_id) + " is already open");
  }
  const SamplingParams sampling = FromWire(m.sampling);
  LOCKSTEP_RETURN_IF_ERROR(ValidateSamplingParams(sampling).WithContext("session sampling"));
  LOCKSTEP_RETURN_IF_ERROR(SetWindows(m.window, stage_.num_layers, cache));
  const uint64_t reserved = ReserveHint(m.reserve_positions, cache);
  sessions_.try_emplace(m.session_id, std::move(cache), sampling).first->second.trace = m.trace;
  return reserved;
}

uint64_t SessionTable::ReserveHint(uint32_t positions, KvCache& cache) const {
  const uint64_t want =
      stage_.max_positions > 0 ? std::min<uint64_t>(positions, stage_.max_positions) : positions;
  // A hint only: never past the model's positions or the KV budget.
  if (want == 0 || !CheckKvBudget(want, [] { return std::string(); }).ok()) return 0;
  cache.Reserve(want);
  return want;
}

Status SessionTable::Evict(const wire::Evict& m) {
  LOCKSTEP_ASSIGN_OR_RETURN(StageSession * s, Find(m.session_id));
  LOCKSTEP_RETURN_IF_ERROR(CheckNotRelaying(m.session_id, "evict"));
  return s->cache.Evict(m.from, m.count);
}

Result<uint64_t> SessionTable::Fork(const wire::Fork& m) {
  if (sessions_.count(m.new_session_id)) {
    return InvalidError("fork: session " + std::to_string(m.new_session_id) + " already exists");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(StageSession * src, Find(m.source_session_id));
  LOCKSTEP_RETURN_IF_ERROR(CheckNotRelaying(m.source_session_id, "fork"));
  LOCKSTEP_RETURN_IF_ERROR(CheckKvBudget(src->cache.size(), [&m] {
    return "fork of session " + std::to_string(m.source_session_id) + " into " +
           std::to_string(m.new_session_id);
  }));
  KvCache copy = src->cache.Clone();
  const uint64_t reserved = ReserveHint(m.reserve_positions, copy);
  sessions_.try_emplace(m.new_session_id, std::move(copy), src->sampling).first->second.trace =
      src->trace;
  return reserved;
}

void SessionTable::Fail(uint64_t session_id, const Status& st) {
  auto it = sessions_.find(session_id);
  if (it != sessions_.end() && it->second.failed.ok()) it->second.failed = st;
}

bool SessionTable::IsStaleRelay(const wire::Message& m) const {
  auto* t = std::get_if<wire::TokenInput>(&m);
  if (t == nullptr || !t->relayed) return false;
  auto it = sessions_.find(t->session_id);
  return it == sessions_.end() || !it->second.failed.ok();
}

Status SessionTable::CheckNotRelaying(uint64_t session_id, const char* what) const {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return Status::Ok();
  return step_rules::CheckNotRelaying(session_id, it->second.relay, what);
}

Result<StageSession*> SessionTable::AdmitTokens(const wire::TokenInput& m) {
  if (!stage_.is_first) return InvalidError("token input sent to a stage that is not first");
  if (m.token_ids.empty()) return InvalidError("token input without tokens");
  LOCKSTEP_ASSIGN_OR_RETURN(StageSession * s, Find(m.session_id));
  // Who may send this step before where it goes: a relayed step the session
  // does not expect is refused as such even when its position is stale too.
  LOCKSTEP_RETURN_IF_ERROR(step_rules::CheckRelay(s->relay, m, stage_.max_positions));
  if (m.step_rows > 0) {  // (the name is built only then: a decode step allocates nothing)
    LOCKSTEP_RETURN_IF_ERROR(wire::CheckStepRowsShape(m.step_rows, m.handoff, m.relayed,
                                                      m.token_ids.size(), StepName(m)));
  }
  LOCKSTEP_RETURN_IF_ERROR(CheckPosition(*s, m.first_position, m.token_ids.size()));
  LOCKSTEP_RETURN_IF_ERROR(CheckKvBudget(m.token_ids.size(), [&m] { return StepName(m); }));
  return s;
}

Result<StageSession*> SessionTable::AdmitHidden(const wire::HiddenFrame& m) {
  LOCKSTEP_ASSIGN_OR_RETURN(StageSession * s, Find(m.session_id));
  if (stage_.is_first) return InvalidError("hidden frame sent to the first stage");
  if (m.hidden != stage_.hidden) {
    return InvalidError("hidden frame width " + std::to_string(m.hidden) + ", model width " +
                        std::to_string(stage_.hidden));
  }
  if (m.resume_layer != stage_.layer_lo) {
    return InvalidError("hidden frame resumes at layer " + std::to_string(m.resume_layer) +
                        " but this stage starts at layer " + std::to_string(stage_.layer_lo));
  }
  if (m.step_rows > 0) {
    LOCKSTEP_RETURN_IF_ERROR(
        wire::CheckStepRowsShape(m.step_rows, m.handoff, false, m.seq, StepName(m)));
  }
  LOCKSTEP_RETURN_IF_ERROR(CheckPosition(*s, m.first_position, m.seq));
  LOCKSTEP_RETURN_IF_ERROR(CheckKvBudget(m.seq, [&m] { return StepName(m); }));
  const size_t expected = s->trace ? size_t{m.resume_layer} * std::max<size_t>(1, m.step_rows) : 0;
  if (m.layer_digests.size() != expected) {
    return InvalidError("hidden frame carries " + std::to_string(m.layer_digests.size()) +
                        " layer digests, expected " + std::to_string(expected) +
                        (s->trace ? " (one per earlier layer and step row: the session is traced)"
                                  : " (the session is not traced)"));
  }
  return s;
}

void SessionTable::NoteRelay(StageSession& s, const wire::TokenInput& m) {
  if (m.relayed || step_rules::RelayOf(m) > 0) s.relay = {step_rules::RelayOf(m), m.step + 1};
}

Status SessionTable::CheckPosition(const StageSession& s, uint32_t first_position,
                                   size_t n) const {
  return step_rules::CheckPosition(static_cast<uint32_t>(s.cache.size()), first_position, n,
                                   stage_.max_positions);
}

Status SessionTable::CheckKvBudget(uint64_t entries,
                                   const std::function<std::string()>& what) const {
  return step_rules::CheckKvBudget(
      stage_.entry_bytes, this->entries() + held_for_batch_, entries, kv_budget_,
      [&] { return what() + " (KV bytes of all sessions on " + stage_.who + ")"; });
}

}  // namespace lockstep
