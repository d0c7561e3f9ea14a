#include "worker/stage_host.h"

#include <algorithm>
#include <chrono>
#include <iostream>

#include "base/limits.h"
#include "engine/kv_bytes.h"
#include "worker/stage_assignment.h"
#include "worker/step_rules.h"
#ifdef LOCKSTEP_FAULT_INJECTION
#include "worker/bit_flip.h"
#endif

namespace lockstep {
namespace {

using stage_assignment::LayerRange;
using step_rules::RelayOf;

// Adds the time from construction to destruction to *nanos.
class ComputeTimer {
 public:
  explicit ComputeTimer(uint64_t* nanos) : nanos_(nanos), t0_(std::chrono::steady_clock::now()) {}
  ~ComputeTimer() {
    *nanos_ += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now() - t0_)
                                         .count());
  }
  ComputeTimer(const ComputeTimer&) = delete;
  ComputeTimer& operator=(const ComputeTimer&) = delete;

 private:
  uint64_t* nanos_;
  std::chrono::steady_clock::time_point t0_;
};

#ifdef LOCKSTEP_FAULT_INJECTION
// The test build's one fault, from LOCKSTEP_FAULT_FLIP (bit_flip.h).
std::optional<BitFlip>& Fault() {
  static std::optional<BitFlip> fault = BitFlip::FromEnv();
  return fault;
}
#endif

// The observer a step's layers report to: `traced` (or none), wrapped by
// the test build's fault.
LayerObserver* ObserverFor([[maybe_unused]] uint32_t step, LayerObserver* traced) {
#ifdef LOCKSTEP_FAULT_INJECTION
  if (Fault()) return Fault()->For(step, traced);
#endif
  return traced;
}

}  // namespace

StageHost::StageHost(std::string worker_name, ComputeOptions compute)
    : name_(std::move(worker_name)), compute_(std::move(compute)) {}

std::string StageHost::Who() const {
  if (!stage_) return "worker " + name_ + " (unassigned)";
  return "worker " + name_ + " stage " + std::to_string(assign_.worker_index) + " layers " +
         LayerRange(assign_.layer_lo, assign_.layer_hi);
}

void StageHost::Handle(const wire::Message& m, std::vector<Outgoing>* out) {
  if (auto* a = std::get_if<wire::Assign>(&m)) return OnAssign(*a, out);
  if (sessions_.IsStaleRelay(m)) return;  // in flight when its session went
  bool has_session = false;
  SessionOf(m, &has_session);
  Status st;
  if (!stage_) {
    st = InvalidError(std::string("'") + wire::MessageName(m) + "' before any Assign");
  } else if (auto* p = std::get_if<wire::TokenInput>(&m)) {
    st = OnTokens(*p, out);
  } else if (auto* p = std::get_if<wire::HiddenFrame>(&m)) {
    st = OnHidden(*p, out);
  } else if (!has_session) {
    st = InvalidError(std::string("unexpected '") + wire::MessageName(m) + "' message");
  } else {
    if (auto* p = std::get_if<wire::SessionOpen>(&m)) st = OnOpen(*p);
    if (auto* p = std::get_if<wire::Evict>(&m)) st = sessions_.Evict(*p);
    if (auto* p = std::get_if<wire::Fork>(&m)) st = OnFork(*p);
    if (auto* p = std::get_if<wire::Release>(&m)) sessions_.Release(p->session_id);
    Forward(m, out);  // later stages stay in step even when this one failed
  }
  if (st.ok()) return;
  if (!has_session) return Report(st, false, 0, out);
  Refuse(m, st, out);
}

void StageHost::Refuse(const wire::Message& m, const Status& st, std::vector<Outgoing>* out) {
  bool has = false;
  const uint64_t session = SessionOf(m, &has);
  auto* t = std::get_if<wire::TokenInput>(&m);
  if (st.kind() == ErrorKind::kOverloaded && assign_.is_first && t != nullptr && !t->relayed) {
    return Report(st, true, session, out);  // refused before any stage ran it
  }
  FailSession(session, st, out);
}

void StageHost::FailSession(uint64_t session_id, const Status& st, std::vector<Outgoing>* out) {
  sessions_.Fail(session_id, st);
  Report(st, true, session_id, out);
}

void StageHost::Report(const Status& st, bool has_session, uint64_t session_id,
                       std::vector<Outgoing>* out) const {
  const std::optional<uint64_t> session =
      has_session ? std::optional<uint64_t>(session_id) : std::nullopt;
  out->push_back(Outgoing{Outgoing::To::kCoordinator,
                          wire::MarshalMessage(wire::ErrorReport::From(st, Who(), session)), "",
                          "", has_session, session_id});
}

void StageHost::Forward(const wire::Message& m, std::vector<Outgoing>* out) const {
  if (assign_.is_last) return;
  bool has = false;
  const uint64_t session = SessionOf(m, &has);
  out->push_back(
      Outgoing{Outgoing::To::kNextStage, wire::MarshalMessage(m), "", "", has, session});
}

// ---- assignment -------------------------------------------------------------

void StageHost::OnAssign(const wire::Assign& m, std::vector<Outgoing>* out) {
  if (stage_ && stage_assignment::SameStage(assign_, m)) return Rewire(m, out);
  stage_ = LoadedStage{};
  sessions_.Clear();
  scratch_ = ForwardScratch();
  assign_ = m;
  Status st = LoadAssignment(m, out);
  if (!st.ok()) {
    stage_ = LoadedStage{};
    Report(st.WithContext("assign layers " + LayerRange(m.layer_lo, m.layer_hi)), false, 0, out);
  }
}

void StageHost::Rewire(const wire::Assign& m, std::vector<Outgoing>* out) {
  assign_ = m;
  // Its sender may be a coordinator that has not seen this worker yet (one
  // restarted with the same key): every Assign is answered Hello, then ack.
  out->push_back(
      Outgoing{Outgoing::To::kCoordinator, wire::MarshalMessage(hello_), "", "", false, 0});
  stage_assignment::AppendLinksAndAck(m, out);
}

Status StageHost::LoadAssignment(const wire::Assign& m, std::vector<Outgoing>* out) {
  const std::string& dir = model_dir_override_.empty() ? m.model_dir : model_dir_override_;
  LOCKSTEP_ASSIGN_OR_RETURN(stage_assignment::Loaded loaded,
                            stage_assignment::Load(m, dir, compute_, weight_budget_, name_));
  stage_ = std::move(loaded.stage);
  hello_ = std::move(loaded.hello);
  if (!stage_.weight_cache_note.empty()) {
    std::cerr << "lockstep worker: " << stage_.weight_cache_note << "\n";
  }
  out->push_back(
      Outgoing{Outgoing::To::kCoordinator, wire::MarshalMessage(hello_), "", "", false, 0});
  LOCKSTEP_RETURN_IF_ERROR(stage_assignment::CheckHashes(m, hello_));
  const ModelConfig& config = stage_->config();
  sessions_.Configure(SessionTable::Stage{
      KvBytesPerPosition(config, static_cast<int>(m.layer_lo), static_cast<int>(m.layer_hi)),
      MaxPositions(Limits{}, config.max_position_embeddings), config.num_layers, m.is_first,
      m.layer_lo, stage_->hidden(), Who()});
  emitter_.Configure(m.worker_index, m.layer_hi, stage_->hidden(), stage_->pool());
  batch_hidden_.assign(max_batch_ * stage_->hidden(), 0.0f);
  batch_logits_.assign(m.is_last ? max_batch_ * stage_->vocab() : 0, 0.0f);  // >= 1 row
  batch_inputs_.reserve(max_batch_);
  batch_items_.reserve(max_batch_);
  // The ack's resident bytes are measured now the model's files are
  // released: only this stage's tensors stay resident.
  stage_assignment::AppendLinksAndAck(m, out);
  return Status::Ok();
}

uint64_t StageHost::kv_entry_bytes() const { return stage_ ? sessions_.entry_bytes() : 0; }

// ---- steps ------------------------------------------------------------------

Status StageHost::OnOpen(const wire::SessionOpen& m) {
  LOCKSTEP_ASSIGN_OR_RETURN(const uint64_t reserved, sessions_.Open(m, stage_->NewCache()));
  // Attention over the reserved keys (the scratch grows only).
  if (reserved > 0) stage_->ReserveScratch(scratch_, 1, reserved);
  return Status::Ok();
}

Status StageHost::OnFork(const wire::Fork& m) {
  LOCKSTEP_ASSIGN_OR_RETURN(const uint64_t reserved, sessions_.Fork(m));
  if (reserved > 0) stage_->ReserveScratch(scratch_, 1, reserved);
  return Status::Ok();
}

Status StageHost::AcceptTokens(const wire::TokenInput& m, StepInput* in) {
  LOCKSTEP_ASSIGN_OR_RETURN(StageSession * s, sessions_.AdmitTokens(m));
  LOCKSTEP_RETURN_IF_ERROR(stage_->Embed(m.token_ids, &hidden_));
  trace_.Clear();
  SessionTable::NoteRelay(*s, m);
  *in = StepInput{s,          m.session_id, m.step,     m.first_position, m.token_ids.size(),
                  &m.handoff, m.no_output,  RelayOf(m), m.step_rows};
  return Status::Ok();
}

Status StageHost::AcceptHidden(const wire::HiddenFrame& m, StepInput* in) {
  if (observe_hidden_) observe_hidden_(m);
  LOCKSTEP_ASSIGN_OR_RETURN(StageSession * s, sessions_.AdmitHidden(m));
  trace_.Clear(m.layer_digests);
  hidden_.assign(m.payload.begin(), m.payload.end());
  *in = StepInput{s,          m.session_id, m.step,     m.first_position, m.seq,
                  &m.handoff, m.no_output,  RelayOf(m), m.step_rows};
  return Status::Ok();
}

Status StageHost::OnTokens(const wire::TokenInput& m, std::vector<Outgoing>* out) {
  StepInput in;
  LOCKSTEP_RETURN_IF_ERROR(AcceptTokens(m, &in));
  return ForwardAndEmit(in, out);
}

Status StageHost::OnHidden(const wire::HiddenFrame& m, std::vector<Outgoing>* out) {
  StepInput in;
  LOCKSTEP_RETURN_IF_ERROR(AcceptHidden(m, &in));
  return ForwardAndEmit(in, out);
}

Status StageHost::ForwardAndEmit(const StepInput& in, std::vector<Outgoing>* out) {
  const ComputeTimer timer(&compute_nanos_);
  if (assign_.is_last && in.no_output) {  // nobody needs the logits: none, and no reply
    return stage_->Forward(hidden_, in.first_pos, in.session->cache, scratch_);
  }
  if (in.step_rows > 0) return ForwardRows(in, out);
  const std::span<float> logits(batch_logits_.data(), assign_.is_last ? stage_->vocab() : 0);
  scratch_.set_observer(ObserverFor(in.step, in.session->trace ? &trace_ : nullptr));
  const Status st = stage_->Step(hidden_, in.first_pos, in.session->cache, scratch_, logits);
  scratch_.set_observer(nullptr);
  LOCKSTEP_RETURN_IF_ERROR(st);
  if (assign_.is_last) return emitter_.EmitOutcome(in, logits, trace_.digests(), out);
  emitter_.EmitHidden(in, hidden_, trace_.digests(), out);
  return Status::Ok();
}

Status StageHost::ForwardRows(const StepInput& in, std::vector<Outgoing>* out) {
  scratch_.set_observer(ObserverFor(
      in.step, row_steps_.Start(in.n, in.step_rows, assign_.layer_hi - assign_.layer_lo,
                                in.session->trace,
                                trace_.digests())));  // the earlier stages' (AcceptHidden)
  const Status st = stage_->Forward(hidden_, in.first_pos, in.session->cache, scratch_);
  scratch_.set_observer(nullptr);
  LOCKSTEP_RETURN_IF_ERROR(st);
  if (!assign_.is_last) {
    emitter_.EmitHidden(in, hidden_, row_steps_.digests(), out);
    return Status::Ok();
  }
  LOCKSTEP_ASSIGN_OR_RETURN(wire::StepResult r,
                            row_steps_.Choose(*stage_, hidden_, in.step_rows, in.session->sampling,
                                              **in.handoff, scratch_));
  emitter_.EmitRowsResult(in, std::move(r), out);
  return Status::Ok();
}

// ---- batched decode steps ---------------------------------------------------

bool StageHost::IsDecodeStep(const wire::Message& m) const {
  if (!stage_) return false;
  if (auto* p = std::get_if<wire::TokenInput>(&m)) {
    return assign_.is_first && p->token_ids.size() == 1;
  }
  if (auto* p = std::get_if<wire::HiddenFrame>(&m)) {
    return !assign_.is_first && p->seq == 1 && p->hidden == stage_->hidden() &&
           p->payload.size() == stage_->hidden();
  }
  return false;
}

bool StageHost::CanBatch(std::span<const wire::Message* const> messages) const {
  // ForwardBatch needs one cache per row; a traced session steps alone.
  if (messages.size() <= 1 || messages.size() > max_batch_ || !stage_) return false;
  bool has = false;
  for (size_t i = 0; i < messages.size(); ++i) {
    const uint64_t session = SessionOf(*messages[i], &has);
    if (sessions_.IsTraced(session)) return false;
    for (size_t j = 0; j < i; ++j) {
      if (SessionOf(*messages[j], &has) == session) return false;
    }
  }
  return true;
}

void StageHost::HandleDecodeBatch(std::span<const wire::Message* const> messages,
                                  std::vector<Outgoing>* out) {
  if (!CanBatch(messages)) {
    for (const wire::Message* m : messages) Handle(*m, out);
    return;
  }
  AcceptBatch(messages, out);
  const size_t rows = batch_inputs_.size();
  if (rows == 0) return;
  const size_t h = stage_->hidden();
  batch_items_.clear();
  for (size_t i = 0; i < rows; ++i) {
    batch_items_.push_back(Stage::BatchItem{
        std::span<float>(batch_hidden_.data() + i * h, h),
        static_cast<int64_t>(batch_inputs_[i].first_pos), &batch_inputs_[i].session->cache});
  }
  const ComputeTimer timer(&compute_nanos_);
  const Status st = stage_->ForwardBatch(batch_items_, scratch_);
  if (!st.ok()) {
    for (const StepInput& in : batch_inputs_) FailSession(in.session_id, st, out);
    return;
  }
  if (rows > 1) {
    ++batched_steps_;
    batched_rows_ += rows;
  }
  if (!assign_.is_last) {
    for (size_t i = 0; i < rows; ++i) {
      emitter_.EmitHidden(batch_inputs_[i], std::span<const float>(batch_hidden_.data() + i * h, h),
                          {}, out);
    }
    return;
  }
  const size_t v = stage_->vocab();
  stage_->LogitsBatch(std::span<const float>(batch_hidden_.data(), rows * h),
                      std::span<float>(batch_logits_.data(), rows * v), scratch_);
  emitter_.EmitOutcomes(
      batch_inputs_, std::span<const float>(batch_logits_.data(), rows * v),
      [this, out](const StepInput& in, const Status& failed) {
        FailSession(in.session_id, failed, out);
      },
      out);
}

// Validates each step exactly as Handle would and gathers the accepted rows
// into batch_hidden_/batch_inputs_; a refused step is refused as Handle
// would, in its place in the order.
void StageHost::AcceptBatch(std::span<const wire::Message* const> messages,
                            std::vector<Outgoing>* out) {
  const size_t h = stage_->hidden();
  batch_inputs_.clear();
  for (const wire::Message* m : messages) {
    if (sessions_.IsStaleRelay(*m)) continue;  // as Handle: in flight when its session went
    StepInput in;
    Status st;
    if (auto* t = std::get_if<wire::TokenInput>(m)) {
      st = AcceptTokens(*t, &in);
    } else if (auto* f = std::get_if<wire::HiddenFrame>(m)) {
      st = AcceptHidden(*f, &in);
    } else {
      st = InternalError(std::string("'") + wire::MessageName(*m) + "' is not a decode step");
    }
    if (st.ok() && (in.n != 1 || hidden_.size() != h)) {
      st = InternalError("a decode step of " + std::to_string(in.n) + " rows");
    }
    if (!st.ok()) {
      Refuse(*m, st, out);
      continue;
    }
    std::copy(hidden_.begin(), hidden_.end(), batch_hidden_.begin() + batch_inputs_.size() * h);
    batch_inputs_.push_back(in);
    sessions_.HoldForBatch(1);
  }
  sessions_.EndBatch();
}

}  // namespace lockstep
