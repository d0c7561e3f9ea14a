#include "worker/stage_host.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "base/limits.h"
#include "base/step_timeline.h"
#include "engine/kv_bytes.h"
#include "engine/step_outcome.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/fp_env.h"
#include "worker/step_rules.h"
#ifdef LOCKSTEP_FAULT_INJECTION
#include "worker/bit_flip.h"
#endif

namespace lockstep {
namespace {

using step_rules::RelayOf;
using step_rules::StepName;

SamplingParams FromWire(const wire::Sampling& w) {
  return SamplingParams{std::bit_cast<float>(w.temperature_bits), w.top_k,
                        std::bit_cast<float>(w.top_p_bits), w.seed};
}

std::string Range(uint32_t lo, uint32_t hi) {
  return "[" + std::to_string(lo) + "," + std::to_string(hi) + ")";
}

// Mismatch naming the first differing artifact, or Ok.
Status CompareHash(const char* what, const Digest& expected, const Digest& actual) {
  if (expected == actual) return Status::Ok();
  return MismatchError(std::string(what) + " differs: assigned " + ToHex(expected) +
                       ", this worker's file has " + ToHex(actual));
}

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

// Pins are checked for the files (or GGUF parts) they name; verifying by
// parts must also cover every one this stage reads, or one the assignment
// left out would load unchecked while the Hello reports the assigned
// weights digest.
Status EveryReadFileIsPinned(const Checkpoint& weights, const ModelPins& pins,
                             const std::string& dir) {
  for (const std::string& name : weights.digest_names()) {
    if (pins.files.count(name) == 0) {
      return MismatchError(dir + "/" + name +
                           ": this stage reads it, but the assignment gives no sha256 for it");
    }
  }
  return Status::Ok();
}

}  // namespace

uint64_t ResidentBytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    std::istringstream fields(line.substr(6));
    uint64_t kib = 0;
    fields >> kib;
    return kib * 1024;
  }
  return 0;
}

StageHost::StageHost(std::string worker_name, ComputeOptions compute)
    : name_(std::move(worker_name)), compute_(std::move(compute)) {}

std::string StageHost::Who() const {
  if (!stage_) return "worker " + name_ + " (unassigned)";
  return "worker " + name_ + " stage " + std::to_string(assign_.worker_index) + " layers " +
         Range(assign_.layer_lo, assign_.layer_hi);
}

uint64_t StageHost::SessionOf(const wire::Message& m, bool* has) {
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

uint32_t StageHost::StepOf(const wire::Message& m) {
  if (auto* p = std::get_if<wire::TokenInput>(&m)) return p->step;
  if (auto* p = std::get_if<wire::HiddenFrame>(&m)) return p->step;
  return 0;
}

void StageHost::Handle(const wire::Message& m, std::vector<Outgoing>* out) {
  if (auto* a = std::get_if<wire::Assign>(&m)) return OnAssign(*a, out);
  if (IsStaleRelay(m)) return;  // in flight when its session went
  bool has_session = false;
  const uint64_t session = SessionOf(m, &has_session);
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
    if (auto* p = std::get_if<wire::Evict>(&m)) st = OnEvict(*p);
    if (auto* p = std::get_if<wire::Fork>(&m)) st = OnFork(*p);
    if (auto* p = std::get_if<wire::Release>(&m)) OnRelease(*p);
    Forward(m, out);  // later stages stay in step even when this one failed
  }
  if (auto* t = std::get_if<wire::TokenInput>(&m);
      st.kind() == ErrorKind::kOverloaded && assign_.is_first && t != nullptr && !t->relayed) {
    return Report(st, true, session, out);  // refused before any stage ran it
  }
  if (!st.ok()) {
    if (has_session) return FailSession(session, st, out);
    Report(st, false, 0, out);
  }
}

void StageHost::FailSession(uint64_t session_id, const Status& st, std::vector<Outgoing>* out) {
  auto it = sessions_.find(session_id);
  if (it != sessions_.end() && it->second.failed.ok()) it->second.failed = st;
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

bool StageHost::SameStage(const wire::Assign& m) const {
  const wire::Assign& a = assign_;
  return stage_ && a.model_dir == m.model_dir &&
         a.expected_weights_sha256 == m.expected_weights_sha256 &&
         a.expected_config_sha256 == m.expected_config_sha256 &&
         a.expected_tokenizer_sha256 == m.expected_tokenizer_sha256 &&
         a.layer_lo == m.layer_lo && a.layer_hi == m.layer_hi && a.is_first == m.is_first &&
         a.is_last == m.is_last && a.worker_index == m.worker_index;
}

void StageHost::Rewire(const wire::Assign& m, std::vector<Outgoing>* out) {
  assign_ = m;
  // Its sender may be a coordinator that has not seen this worker yet (one
  // restarted with the same key): every Assign is answered Hello, then ack.
  out->push_back(
      Outgoing{Outgoing::To::kCoordinator, wire::MarshalMessage(hello_), "", "", false, 0});
  ConnectLinks(m, out);
  const wire::AssignAck ack{m.worker_index, m.layer_lo, m.layer_hi, ResidentBytes()};
  out->push_back(
      Outgoing{Outgoing::To::kCoordinator, wire::MarshalMessage(ack), "", "", false, 0});
}

void StageHost::ConnectLinks(const wire::Assign& m, std::vector<Outgoing>* out) {
  if (!m.is_last) {
    out->push_back(Outgoing{Outgoing::To::kConnectNext, {}, m.next_hop,
                            "stage " + std::to_string(m.worker_index + 1), false, 0});
  }
  if (m.is_last && !m.ring_hop.empty()) {
    out->push_back(Outgoing{Outgoing::To::kConnectRing, {}, m.ring_hop, "stage 0", false, 0});
  }
}

void StageHost::OnAssign(const wire::Assign& m, std::vector<Outgoing>* out) {
  if (SameStage(m)) return Rewire(m, out);
  stage_ = LoadedStage{};
  sessions_.clear();
  scratch_ = ForwardScratch();
  assign_ = m;
  Status st = LoadAssignment(m, out);
  if (!st.ok()) {
    stage_ = LoadedStage{};
    Report(st.WithContext("assign layers " + Range(m.layer_lo, m.layer_hi)), false, 0, out);
  }
}

Status StageHost::CheckWeightBudget(const Checkpoint& weights, const ModelConfig& config,
                                    const StageSpec& spec) const {
  LOCKSTEP_ASSIGN_OR_RETURN(const PartBytes need, MeasureStageBytes(weights, config, spec));
  return CheckLimit(ErrorKind::kInvalid, "weight_bytes_per_worker (--memory-budget)",
                    "the weights of layers " + Range(static_cast<uint32_t>(spec.lo),
                                                     static_cast<uint32_t>(spec.hi)) +
                        " on worker " + name_,
                    need.resident, weight_budget_);
}

Status StageHost::LoadAssignment(const wire::Assign& m, std::vector<Outgoing>* out) {
  LOCKSTEP_RETURN_IF_ERROR(ops::PinFpEnvironment());
  const std::string& dir = model_dir_override_.empty() ? m.model_dir : model_dir_override_;
  const StageSpec spec{static_cast<int>(m.layer_lo), static_cast<int>(m.layer_hi), m.is_first,
                       m.is_last};
  // A sharded checkpoint is verified by parts: only the files holding this
  // stage's tensors are opened, and each must hash as the assignment says
  // (LoadStage refuses naming the file); a GGUF file likewise by its parts,
  // the header and this stage's tensors, the rest never read
  // (docs/spec_notes.md, "GGUF parts"). Otherwise every weight file is
  // hashed and reported.
  const bool by_parts = !m.weight_files.empty();
  ModelPins pins;
  pins.name = "the assignment";
  for (const wire::WeightFile& f : m.weight_files) pins.files[f.name] = f.sha256;
  LOCKSTEP_ASSIGN_OR_RETURN(OpenModel model, OpenModelDir(dir, pins, by_parts ? &spec : nullptr));
  LOCKSTEP_RETURN_IF_ERROR(ValidateStageSpec(model.config, spec));
  if (by_parts && !model.files.sharded && !model.files.gguf) {
    return InvalidError(dir + ": the assignment lists weight files of a sharded checkpoint, but " +
                        model.files.weights_path + " is a single file");
  }
  if (by_parts) LOCKSTEP_RETURN_IF_ERROR(EveryReadFileIsPinned(*model.weights, pins, dir));
  if (weight_budget_ > 0) {  // before a byte is loaded
    LOCKSTEP_RETURN_IF_ERROR(CheckWeightBudget(*model.weights, model.config, spec));
  }
  if (!m.is_last && m.next_hop.empty()) return InvalidError("no next hop for a non-last stage");
  // The weights are hashed as they load; nothing is computed before the
  // digests are checked (here and by the coordinator from the Hello).
  LOCKSTEP_ASSIGN_OR_RETURN(stage_, LoadStage(model, spec, compute_));
  // Its parts verified, a GGUF file is the one the assignment names, whose
  // digest is also its config and tokenizer digest (E2.5).
  if (by_parts && model.files.gguf) {
    model.hashes.config = model.hashes.tokenizer = m.expected_weights_sha256;
  }
  if (!stage_.weight_cache_note.empty()) std::cerr << "lockstep worker: " << stage_.weight_cache_note << "\n";
  wire::Hello hello;
  hello.worker_id = name_;
  hello.weights_sha256 = by_parts ? m.expected_weights_sha256 : model.hashes.weights;
  hello.config_sha256 = model.hashes.config;
  hello.tokenizer_sha256 = model.hashes.tokenizer;
  hello.table_digest = model.table_digest;
  hello.inv_freq_table_digest = model.inv_freq_table_digest;
  const ops::Kernels* kernels = ops::KernelsByName(compute_.isa);
  hello.isa = ops::IsaName() + "/" + (kernels ? kernels->name : compute_.isa);
  out->push_back(
      Outgoing{Outgoing::To::kCoordinator, wire::MarshalMessage(hello), "", "", false, 0});
  hello_ = hello;
  LOCKSTEP_RETURN_IF_ERROR(
      CompareHash("weights_sha256", m.expected_weights_sha256, hello.weights_sha256));
  LOCKSTEP_RETURN_IF_ERROR(
      CompareHash("config_sha256", m.expected_config_sha256, model.hashes.config));
  LOCKSTEP_RETURN_IF_ERROR(
      CompareHash("tokenizer_sha256", m.expected_tokenizer_sha256, model.hashes.tokenizer));
  batch_hidden_.assign(max_batch_ * stage_->hidden(), 0.0f);
  batch_logits_.assign(m.is_last ? max_batch_ * stage_->vocab() : 0, 0.0f);  // >= 1 row
  batch_inputs_.reserve(max_batch_);
  batch_items_.reserve(max_batch_);
  // `model` (and its mmap of the whole file) goes away here: only this
  // stage's widened tensors stay resident.
  ConnectLinks(m, out);
  wire::AssignAck ack{m.worker_index, m.layer_lo, m.layer_hi, 0};
  out->push_back(Outgoing{Outgoing::To::kCoordinator, {}, "", "", false, 0});
  // Measured after the OpenModel above is released (end of scope is too
  // late to include in the ack), so unmap explicitly first.
  model.weights.reset();
  ack.resident_bytes = ResidentBytes();
  out->back().frame = wire::MarshalMessage(ack);
  return Status::Ok();
}

// ---- sessions ---------------------------------------------------------------

Result<StageHost::Session*> StageHost::Find(uint64_t session_id) {
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

Status StageHost::OnOpen(const wire::SessionOpen& m) {
  if (sessions_.count(m.session_id)) {
    return InvalidError("session " + std::to_string(m.session_id) + " is already open");
  }
  const SamplingParams sampling = FromWire(m.sampling);
  LOCKSTEP_RETURN_IF_ERROR(ValidateSamplingParams(sampling).WithContext("session sampling"));
  KvCache cache = stage_->NewCache();
  const int layers = stage_->config().num_layers;
  const wire::WindowSpec& w = m.window;
  if (w.kind == wire::WindowSpec::Kind::kPerLayer &&
      w.per_layer.size() != static_cast<size_t>(layers)) {
    return InvalidError("window list has " + std::to_string(w.per_layer.size()) +
                        " entries for a model of " + std::to_string(layers) + " layers");
  }
  for (int l = cache.lo(); l < cache.hi(); ++l) {
    uint32_t window = 0;
    if (w.kind == wire::WindowSpec::Kind::kGlobal) window = w.global;
    if (w.kind == wire::WindowSpec::Kind::kPerLayer) window = w.per_layer[static_cast<size_t>(l)];
    if (window > static_cast<uint32_t>(INT32_MAX)) return InvalidError("window too large");
    LOCKSTEP_RETURN_IF_ERROR(cache.SetWindow(l, static_cast<int>(window)));
  }
  ReserveHint(m, cache);
  sessions_.try_emplace(m.session_id, std::move(cache), sampling).first->second.trace = m.trace;
  return Status::Ok();
}

void StageHost::ReserveHint(const wire::SessionOpen& m, KvCache& cache) {
  const uint32_t max = max_positions();
  const uint64_t want = max > 0 ? std::min(m.reserve_positions, max) : m.reserve_positions;
  // A hint only: never past the model's positions or the KV budget.
  if (want == 0 || !CheckKvBudget(want, [] { return std::string(); }).ok()) return;
  cache.Reserve(want);
  stage_->ReserveScratch(scratch_, 1, want);  // attention over `want` keys (grows only)
}

Status StageHost::OnEvict(const wire::Evict& m) {
  LOCKSTEP_ASSIGN_OR_RETURN(Session * s, Find(m.session_id));
  LOCKSTEP_RETURN_IF_ERROR(CheckNotRelaying(m.session_id, "evict"));
  return s->cache.Evict(m.from, m.count);
}

Status StageHost::CheckNotRelaying(uint64_t session_id, const char* what) const {
  auto it = sessions_.find(session_id);
  if (it == sessions_.end()) return Status::Ok();
  return step_rules::CheckNotRelaying(session_id, it->second.relay, what);
}

bool StageHost::IsStaleRelay(const wire::Message& m) const {
  auto* t = std::get_if<wire::TokenInput>(&m);
  if (t == nullptr || !t->relayed) return false;
  auto it = sessions_.find(t->session_id);
  return it == sessions_.end() || !it->second.failed.ok();
}

Status StageHost::CheckRelay(const Session& s, const wire::TokenInput& m) const {
  return step_rules::CheckRelay(s.relay, m, max_positions());
}

uint32_t StageHost::max_positions() const {
  return MaxPositions(Limits{}, stage_->config().max_position_embeddings);
}

Status StageHost::OnFork(const wire::Fork& m) {
  if (sessions_.count(m.new_session_id)) {
    return InvalidError("fork: session " + std::to_string(m.new_session_id) + " already exists");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(Session * src, Find(m.source_session_id));
  LOCKSTEP_RETURN_IF_ERROR(CheckNotRelaying(m.source_session_id, "fork"));
  LOCKSTEP_RETURN_IF_ERROR(
      CheckKvBudget(src->cache.size(), [&m] {
        return "fork of session " + std::to_string(m.source_session_id) + " into " +
               std::to_string(m.new_session_id);
      }));
  sessions_.try_emplace(m.new_session_id, src->cache.Clone(), src->sampling).first->second.trace =
      src->trace;
  return Status::Ok();
}

Status StageHost::CheckPosition(const Session& s, uint32_t first_position, size_t n) const {
  // Before any work: the model's position bound (base/limits.h).
  return step_rules::CheckPosition(static_cast<uint32_t>(s.cache.size()), first_position, n,
                                   max_positions());
}

uint64_t StageHost::kv_entry_bytes() const {
  if (!stage_) return 0;
  return KvBytesPerPosition(stage_->config(), static_cast<int>(assign_.layer_lo),
                            static_cast<int>(assign_.layer_hi));
}

uint64_t StageHost::kv_entries() const {
  uint64_t n = 0;
  for (const auto& [id, s] : sessions_) n += s.cache.size();
  return n;
}

Status StageHost::CheckKvBudget(uint64_t entries,
                                const std::function<std::string()>& what) const {
  return step_rules::CheckKvBudget(kv_entry_bytes(), kv_entries() + batch_entries_, entries,
                                   kv_budget_, [&] {
                                     return what() + " (KV bytes of all sessions on " + Who() + ")";
                                   });
}

Status StageHost::AcceptTokens(const wire::TokenInput& m, Input* in) {
  if (!assign_.is_first) return InvalidError("token input sent to a stage that is not first");
  if (m.token_ids.empty()) return InvalidError("token input without tokens");
  LOCKSTEP_ASSIGN_OR_RETURN(Session * s, Find(m.session_id));
  // Who may send this step before where it goes: a relayed step the session
  // does not expect is refused as such even when its position is stale too.
  LOCKSTEP_RETURN_IF_ERROR(CheckRelay(*s, m));
  if (m.step_rows > 0) {  // (the name is built only then: a decode step allocates nothing)
    LOCKSTEP_RETURN_IF_ERROR(wire::CheckStepRowsShape(m.step_rows, m.handoff, m.relayed,
                                                      m.token_ids.size(), StepName(m)));
  }
  LOCKSTEP_RETURN_IF_ERROR(CheckPosition(*s, m.first_position, m.token_ids.size()));
  LOCKSTEP_RETURN_IF_ERROR(CheckKvBudget(m.token_ids.size(), [&m] { return StepName(m); }));
  LOCKSTEP_RETURN_IF_ERROR(stage_->Embed(m.token_ids, &hidden_));
  trace_.Clear();
  if (m.relayed || RelayOf(m) > 0) s->relay = {RelayOf(m), m.step + 1};
  *in = Input{s,          m.session_id, m.step,     m.first_position, m.token_ids.size(),
              &m.handoff, m.no_output,  RelayOf(m), m.step_rows};
  return Status::Ok();
}

Status StageHost::AcceptHidden(const wire::HiddenFrame& m, Input* in) {
  if (observe_hidden_) observe_hidden_(m);
  LOCKSTEP_ASSIGN_OR_RETURN(Session * s, Find(m.session_id));
  if (assign_.is_first) return InvalidError("hidden frame sent to the first stage");
  if (m.hidden != stage_->hidden()) {
    return InvalidError("hidden frame width " + std::to_string(m.hidden) + ", model width " +
                        std::to_string(stage_->hidden()));
  }
  if (m.resume_layer != assign_.layer_lo) {
    return InvalidError("hidden frame resumes at layer " + std::to_string(m.resume_layer) +
                        " but this stage starts at layer " + std::to_string(assign_.layer_lo));
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
  trace_.Clear(m.layer_digests);
  hidden_.assign(m.payload.begin(), m.payload.end());
  *in = Input{s,          m.session_id, m.step,     m.first_position, m.seq,
              &m.handoff, m.no_output,  RelayOf(m), m.step_rows};
  return Status::Ok();
}

Status StageHost::OnTokens(const wire::TokenInput& m, std::vector<Outgoing>* out) {
  Input in;
  LOCKSTEP_RETURN_IF_ERROR(AcceptTokens(m, &in));
  return ForwardAndEmit(in, out);
}

Status StageHost::OnHidden(const wire::HiddenFrame& m, std::vector<Outgoing>* out) {
  Input in;
  LOCKSTEP_RETURN_IF_ERROR(AcceptHidden(m, &in));
  return ForwardAndEmit(in, out);
}

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

bool StageHost::DistinctSessions(std::span<const wire::Message* const> messages) {
  for (size_t i = 0; i < messages.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      bool has = false;
      if (SessionOf(*messages[i], &has) == SessionOf(*messages[j], &has)) return false;
    }
  }
  return true;
}

void StageHost::HandleDecodeBatch(std::span<const wire::Message* const> messages,
                                  std::vector<Outgoing>* out) {
  // ForwardBatch needs one cache per row.
  if (messages.size() <= 1 || messages.size() > max_batch_ || !stage_ ||
      !DistinctSessions(messages) || AnyTraced(messages)) {
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
    for (const Input& in : batch_inputs_) FailSession(in.session_id, st, out);
    return;
  }
  if (rows > 1) {
    ++batched_steps_;
    batched_rows_ += rows;
  }
  const size_t v = stage_->vocab();
  if (assign_.is_last) {
    stage_->LogitsBatch(std::span<const float>(batch_hidden_.data(), rows * h),
                        std::span<float>(batch_logits_.data(), rows * v), scratch_);
  }
  if (assign_.is_last) return EmitOutcomes(std::span<const float>(batch_logits_.data(), rows * v), out);
  for (size_t i = 0; i < rows; ++i) {
    EmitHidden(batch_inputs_[i], std::span<const float>(batch_hidden_.data() + i * h, h), out);
  }
}

bool StageHost::AnyTraced(std::span<const wire::Message* const> messages) const {
  for (const wire::Message* m : messages) {
    bool has = false;
    auto it = sessions_.find(SessionOf(*m, &has));
    if (it != sessions_.end() && it->second.trace) return true;
  }
  return false;
}

// Validates each step exactly as Handle would and gathers the accepted rows
// into batch_hidden_/batch_inputs_; a refused step fails only its own
// session, in its place in the order.
void StageHost::AcceptBatch(std::span<const wire::Message* const> messages,
                            std::vector<Outgoing>* out) {
  const size_t h = stage_->hidden();
  batch_inputs_.clear();
  batch_entries_ = 0;
  for (const wire::Message* m : messages) {
    if (IsStaleRelay(*m)) continue;  // as Handle: in flight when its session went
    Input in;
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
      bool has = false;
      auto* t = std::get_if<wire::TokenInput>(m);
      if (st.kind() == ErrorKind::kOverloaded && assign_.is_first && t != nullptr && !t->relayed) {
        Report(st, true, SessionOf(*m, &has), out);  // as Handle: the session stays usable
      } else {
        FailSession(SessionOf(*m, &has), st, out);
      }
      continue;
    }
    std::copy(hidden_.begin(), hidden_.end(), batch_hidden_.begin() + batch_inputs_.size() * h);
    batch_inputs_.push_back(in);
    ++batch_entries_;
  }
  batch_entries_ = 0;
}

Status StageHost::ForwardAndEmit(const Input& in, std::vector<Outgoing>* out) {
  const ComputeTimer timer(&compute_nanos_);
  if (assign_.is_last && in.no_output) {  // nobody needs the logits: none, and no reply
    return stage_->Forward(hidden_, in.first_pos, in.session->cache, scratch_);
  }
  if (in.step_rows > 0) return ForwardRows(in, out);
  const std::span<float> logits(batch_logits_.data(), assign_.is_last ? stage_->vocab() : 0);
  LayerObserver* observer = in.session->trace ? &trace_ : nullptr;
#ifdef LOCKSTEP_FAULT_INJECTION
  if (Fault()) observer = Fault()->For(in.step, observer);
#endif
  scratch_.set_observer(observer);
  const Status st = stage_->Step(hidden_, in.first_pos, in.session->cache, scratch_, logits);
  scratch_.set_observer(nullptr);
  LOCKSTEP_RETURN_IF_ERROR(st);
  if (assign_.is_last) {
    EmitOutcome(in, logits, out);
  } else {
    EmitHidden(in, hidden_, out);
  }
  return Status::Ok();
}

Status StageHost::ForwardRows(const Input& in, std::vector<Outgoing>* out) {
  LayerObserver* observer =
      row_steps_.Start(in.n, in.step_rows, assign_.layer_hi - assign_.layer_lo, in.session->trace,
                       trace_.digests());  // the earlier stages' (AcceptHidden)
#ifdef LOCKSTEP_FAULT_INJECTION
  if (Fault()) observer = Fault()->For(in.step, observer);
#endif
  scratch_.set_observer(observer);
  const Status st = stage_->Forward(hidden_, in.first_pos, in.session->cache, scratch_);
  scratch_.set_observer(nullptr);
  LOCKSTEP_RETURN_IF_ERROR(st);
  if (!assign_.is_last) {
    EmitHidden(in, hidden_, out);
    return Status::Ok();
  }
  LOCKSTEP_ASSIGN_OR_RETURN(wire::StepResult r,
                            row_steps_.Choose(*stage_, hidden_, in.step_rows, in.session->sampling,
                                              **in.handoff, scratch_));
  r.session_id = in.session_id;
  r.step = in.step;
  out->push_back(Outgoing{Outgoing::To::kCoordinator, TakeFrame(), "", "", true, in.session_id,
                          in.step});
  wire::MarshalStepResult(r, &out->back().frame);
  timeline::Mark(timeline::Event::kComputeEnd, assign_.worker_index, in.session_id, in.step);
  return Status::Ok();
}

std::vector<Digest> StageHost::TraceOf(const Input& in) const {
  if (!in.session->trace) return {};
  return trace_.digests();
}

void StageHost::EmitOutcome(const Input& in, std::span<const float> logits,
                           std::vector<Outgoing>* out) {
  if (in.no_output) return;
  if (in.handoff != nullptr && in.handoff->has_value()) {
    const wire::ChainHandoff& h = **in.handoff;
    Result<WitnessChain> chain = WitnessChain::Resume(h.chain_state);
    if (!chain.ok()) return FailSession(in.session_id, chain.status(), out);
    const StepOutcome o =
        ChooseAndWitness(logits, in.session->sampling, h.decode_step, &*chain, &sampling_,
                         stage_->pool());
    if (in.relay > 0) SendRelay(in, o, *chain, out);  // the next step first: it is awaited
    return SendStepResult(in, o, *chain, out);
  }
  wire::Logits msg{in.session_id, in.step, static_cast<uint32_t>(logits.size()),
                   std::vector<float>(logits.begin(), logits.end()), TraceOf(in)};
  out->push_back(Outgoing{Outgoing::To::kCoordinator, wire::MarshalMessage(msg), "", "", true,
                          in.session_id, in.step});
  timeline::Mark(timeline::Event::kComputeEnd, assign_.worker_index, in.session_id, in.step);
}

void StageHost::SendStepResult(const Input& in, const StepOutcome& o, const WitnessChain& chain,
                               std::vector<Outgoing>* out) {
  const wire::StepResult r{in.session_id,   in.step,        o.token,
                           o.logits_sha256, chain.Export(), TraceOf(in),
                           {}};
  out->push_back(Outgoing{Outgoing::To::kCoordinator, TakeFrame(), "", "", true, in.session_id,
                          in.step});
  wire::MarshalStepResult(r, &out->back().frame);
  timeline::Mark(timeline::Event::kComputeEnd, assign_.worker_index, in.session_id, in.step);
}

void StageHost::SendRelay(const Input& in, const StepOutcome& o, const WitnessChain& chain,
                          std::vector<Outgoing>* out) {
  wire::TokenInput& next = out_relay_;  // reused: its token list keeps its storage
  next.phase = wire::TokenInput::Phase::kDecode;
  next.session_id = in.session_id;
  next.step = in.step + 1;
  next.first_position = in.first_pos + static_cast<uint32_t>(in.n);
  next.token_ids.assign(1, o.token);
  next.handoff = wire::ChainHandoff{(*in.handoff)->decode_step + 1, chain.Export(), in.relay - 1};
  next.no_output = false;
  next.relayed = true;
  out->push_back(Outgoing{Outgoing::To::kFirstStage, TakeFrame(), "", "", true, in.session_id,
                          next.step});
  wire::MarshalTokenInput(next, &out->back().frame);
}

void StageHost::EmitOutcomes(std::span<const float> logits, std::vector<Outgoing>* out) {
  const size_t rows = batch_inputs_.size(), v = stage_->vocab();
  if (row_sampling_.size() < rows) row_sampling_.resize(rows);
  row_chains_.clear();
  row_chains_.resize(rows);
  row_outcomes_.assign(rows, StepOutcome{});
  row_choices_.clear();
  for (size_t i = 0; i < rows; ++i) {  // the rows whose token is chosen here
    const Input& in = batch_inputs_[i];
    if (in.no_output || in.handoff == nullptr || !in.handoff->has_value()) continue;
    const wire::ChainHandoff& h = **in.handoff;
    Result<WitnessChain> chain = WitnessChain::Resume(h.chain_state);
    if (!chain.ok()) continue;  // EmitOutcome below fails the session
    row_chains_[i].emplace(std::move(*chain));
    row_choices_.push_back({logits.subspan(i * v, v), &in.session->sampling, h.decode_step,
                            &*row_chains_[i], &row_sampling_[i], &row_outcomes_[i]});
  }
  ChooseAndWitnessAll(row_choices_, stage_->pool());
  for (size_t i = 0; i < rows; ++i) {  // the next steps first: they are awaited
    if (row_chains_[i] && batch_inputs_[i].relay > 0) {
      SendRelay(batch_inputs_[i], row_outcomes_[i], *row_chains_[i], out);
    }
  }
  for (size_t i = 0; i < rows; ++i) {
    if (row_chains_[i]) {
      SendStepResult(batch_inputs_[i], row_outcomes_[i], *row_chains_[i], out);
    } else {
      EmitOutcome(batch_inputs_[i], logits.subspan(i * v, v), out);
    }
  }
}

void StageHost::EmitHidden(const Input& in, std::span<const float> rows,
                           std::vector<Outgoing>* out) {
  const size_t h = stage_->hidden();
  wire::HiddenFrame& frame = out_hidden_;  // reused: its vectors keep their storage
  frame.session_id = in.session_id;
  frame.step = in.step;
  frame.first_position = in.first_pos;
  frame.seq = static_cast<uint32_t>(rows.size() / h);
  frame.hidden = static_cast<uint32_t>(h);
  frame.resume_layer = assign_.layer_hi;
  frame.payload.assign(rows.begin(), rows.end());
  frame.handoff = in.handoff != nullptr ? *in.handoff : std::nullopt;
  frame.no_output = in.no_output;
  frame.step_rows = in.step_rows;
  frame.layer_digests.clear();
  if (in.session->trace) {
    const std::vector<Digest>& d = in.step_rows > 0 ? row_steps_.digests() : trace_.digests();
    frame.layer_digests.assign(d.begin(), d.end());
  }
  out->push_back(
      Outgoing{Outgoing::To::kNextStage, TakeFrame(), "", "", true, in.session_id, in.step});
  wire::MarshalHidden(frame, &out->back().frame);
  timeline::Mark(timeline::Event::kComputeEnd, assign_.worker_index, in.session_id, in.step);
}

wire::Frame StageHost::TakeFrame() { return frame_pool_ ? frame_pool_->Take() : wire::Frame(); }

}  // namespace lockstep
