#include "server/scheduler.h"

#include <algorithm>
#include <bit>
#include <iostream>

#include "engine/draft_proposals.h"
#include "engine/kv_bytes.h"
#include "engine/local_backend.h"
#include "engine/ops/fp_env.h"
#include "engine/speculative.h"
#include "runtime/cluster_stepper.h"
#include "runtime/compare.h"

namespace lockstep::server {

using Clock = std::chrono::steady_clock;

namespace {

// The two runs of a determinism_check request: [0] answers, [1] shadows.
struct TwinPair {
  std::optional<Finish> finish[2];
};

// What a session's rows depend on besides its tokens (the window), and on
// a cluster what its held session fixes too (the sampling).
std::string PrefixKey(const DecodeRequest& req, const SamplingParams* fixed = nullptr) {
  std::string key = "window=" + std::to_string(req.window.value_or(-1));
  if (fixed == nullptr) return key;
  const SamplingParams& sampling = *fixed;
  key += " t=" + std::to_string(std::bit_cast<uint32_t>(sampling.temperature)) +
         " k=" + std::to_string(sampling.top_k) +
         " p=" + std::to_string(std::bit_cast<uint32_t>(sampling.top_p)) +
         " seed=" + std::to_string(sampling.seed);
  return key;
}

// KV bytes one position takes over every layer, wherever they live.
uint64_t PositionBytes(const SchedulerBackend& backend) {
  const ModelConfig& c =
      backend.stage != nullptr ? backend.stage->config() : backend.cluster->model_config();
  return KvBytesPerPosition(c, 0, c.num_layers);
}

uint64_t DraftPositionBytes(const Stage& draft) {
  const ModelConfig& c = draft.config();
  return KvBytesPerPosition(c, 0, c.num_layers);
}

// The positions a speculative session's draft cache holds at most: the
// request's and the last step's guesses.
size_t DraftPositions(const GenerationSpec& spec) {
  return spec.request.prompt.size() + spec.request.gen + SpeculativeOptions{}.max_proposals;
}

// The sampling a cluster session is opened with: temperature 0 chooses by
// argmax alone (ChooseToken), so every greedy request shares one.
SamplingParams ClusterSampling(const SamplingParams& requested) {
  return requested.temperature == 0.0f ? SamplingParams{} : requested;
}

// §12.4: the two runs end alike and CompareResults finds every digest equal.
bool SameRun(const Finish& a, const Finish& b) {
  return a.reason == b.reason && runtime::CompareResults(a.result, b.result, "run 1", "run 2").ok();
}

}  // namespace

struct Scheduler::Session {
  GenerationSpec spec;
  std::shared_ptr<GenerationStream> stream;
  bool twin = false;  // the shadow run of a determinism check: never visible
  std::shared_ptr<TwinPair> pair;
  uint64_t reserved_bytes = 0;
  Clock::time_point submitted, last_token;

  std::unique_ptr<LocalBackend> local;    // in process
  std::unique_ptr<RemoteSession> remote;  // on a cluster
  std::optional<DecodeSession> decode;
  std::optional<Speculator> speculator;  // spec.speculative
  uint32_t prefix_reused = 0;
  size_t pushed = 0;  // tokens handed to the stream (or counted, for a twin)
  bool retried = false;  // recomputed once after an unusable prefix
  bool finished = false;

  StepBackend* backend() const {
    return local ? static_cast<StepBackend*>(local.get()) : remote.get();
  }
};

Scheduler::Scheduler(SchedulerBackend backend, const WitnessSeed& seed, const Tokenizer* tokenizer,
                     std::vector<uint32_t> eos, SchedulerOptions options, Metrics& metrics,
                     DraftSource draft)
    : stage_(backend.stage),
      cluster_(backend.cluster),
      seed_(seed),
      tokenizer_(tokenizer),
      eos_(std::move(eos)),
      options_(options),
      metrics_(metrics),
      bytes_per_position_(PositionBytes(backend)),
      draft_(draft),
      draft_bytes_per_position_(draft.stage == nullptr ? 0 : DraftPositionBytes(*draft.stage)),
      prefix_(options.prefix_budget_bytes, bytes_per_position_),
      remote_prefix_(options.prefix_budget_bytes, bytes_per_position_, options.prefix_sessions) {
  if (cluster_ != nullptr) {
    metrics_.SetSource([this] { ReportStages(); });
    stepper_ = std::make_unique<runtime::ClusterBatchStepper>();
  } else {
    local_stepper_ = std::make_unique<LocalBatchStepper>(*stage_);
  }
  batch_.reserve(options_.max_sessions);
  status_.reserve(options_.max_sessions);
  thread_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() {
  metrics_.SetSource(nullptr);
  if (thread_.joinable()) Shutdown(std::chrono::milliseconds(0));
}

size_t Scheduler::ActiveSessions() const {
  std::lock_guard<std::mutex> l(mu_);
  return sessions_;
}

std::variant<std::shared_ptr<GenerationStream>, ApiError> Scheduler::Submit(GenerationSpec spec) {
  const size_t runs = spec.determinism_check ? 2 : 1;
  const uint64_t draft_need = spec.speculative ? DraftPositions(spec) * draft_bytes_per_position_ : 0;
  const uint64_t need = ((spec.request.prompt.size() + spec.request.gen) * bytes_per_position_ +
                         draft_need) * static_cast<uint64_t>(runs);
  auto stream = std::make_shared<GenerationStream>();
  std::vector<std::unique_ptr<Session>> made;
  auto pair = runs == 2 ? std::make_shared<TwinPair>() : nullptr;
  for (size_t r = 0; r < runs; ++r) {
    auto s = std::make_unique<Session>();
    s->spec = spec;
    s->stream = stream;
    s->twin = r == 1;
    s->pair = pair;
    s->reserved_bytes = need / runs;
    s->submitted = Clock::now();
    made.push_back(std::move(s));
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_) {
      ApiError e;
      e.status = 503;
      e.type = "unavailable_error";
      e.code = "shutting_down";
      e.message = "the server is shutting down";
      return e;
    }
    if (sessions_ + runs > options_.max_sessions) {
      return Overloaded("too many sessions: " + std::to_string(sessions_) + " of max_sessions " +
                            std::to_string(options_.max_sessions) + " are in use",
                        "max_sessions");
    }
    if (reserved_bytes_ + need > options_.kv_budget_bytes) {
      return Overloaded("KV memory budget exceeded: this request needs " + std::to_string(need) +
                            " bytes, " + std::to_string(options_.kv_budget_bytes - reserved_bytes_) +
                            " of kv_budget " + std::to_string(options_.kv_budget_bytes) +
                            " are free",
                        "kv_budget");
    }
    sessions_ += runs;
    reserved_bytes_ += need;
    for (auto& s : made) queued_.push_back(std::move(s));
  }
  cv_.notify_all();
  return stream;
}

void Scheduler::Shutdown(std::chrono::milliseconds grace) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!stopping_) {
      stopping_ = true;
      deadline_ = Clock::now() + grace;
    }
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Scheduler::Loop() {
  if (Status pin = ops::PinFpEnvironment(); !pin.ok()) {
    std::cerr << "lockstep serve: " << pin.ToString() << "\n";
    std::abort();  // §1.3: never decode unpinned
  }
  for (;;) {
    std::deque<std::unique_ptr<Session>> fresh;
    bool cancel_all = false;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return !queued_.empty() || !active_.empty() || stopping_; });
      if (stopping_ && queued_.empty() && active_.empty()) break;
      fresh.swap(queued_);
      cancel_all = stopping_ && Clock::now() >= deadline_;
    }
    for (auto& s : fresh) Admit(std::move(s));
    for (auto& s : active_) {
      if (cancel_all || s->stream->cancelled()) Retire(*s, "cancelled", "");
    }
    std::erase_if(active_, [](const auto& s) { return s->finished; });
    if (!active_.empty()) {
      try {
        Step();
      } catch (const std::exception& e) {  // e.g. bad_alloc: fail these sessions, keep serving
        for (auto& s : active_) Retire(*s, "error", std::string("step failed: ") + e.what());
      }
    }
    std::erase_if(active_, [](const auto& s) { return s->finished; });
    size_t waiting = 0;
    for (const auto& s : active_) waiting += s->decode->steps() == 0 ? 1 : 0;
    metrics_.SetQueue(waiting, active_.size());
  }
  metrics_.SetQueue(0, 0);
}

Status Scheduler::OpenLocal(Session& s) {
  const DecodeRequest& req = s.spec.request;
  const size_t positions = req.prompt.size() + req.gen;
  std::optional<KvCache> hit;
  if (!s.twin) {
    hit = prefix_.Lookup(PrefixKey(req), req.prompt, req.prompt.size() - 1,
                         options_.min_prefix_tokens);
    metrics_.PrefixLookup(hit.has_value(), hit ? hit->size() : 0);
  }
  if (hit) {
    s.prefix_reused = static_cast<uint32_t>(hit->size());
    s.local = std::make_unique<LocalBackend>(*stage_, std::move(*hit), positions);
  } else {
    s.local = std::make_unique<LocalBackend>(*stage_, positions);
    if (req.window) LOCKSTEP_RETURN_IF_ERROR(s.local->SetWindow(*req.window));
  }
  // The batch's buffers too: a step of every session at once, a prefill
  // chunk among them, over this session's longest cache.
  local_stepper_->Reserve(options_.prefill_chunk + options_.max_sessions, options_.max_sessions,
                          positions);
  return Status::Ok();
}

Status Scheduler::OpenCluster(Session& s) {
  DecodeRequest& req = s.spec.request;
  req.sampling = ClusterSampling(req.sampling);  // the same tokens (ChooseToken)
  // Every stage reserves the positions the request reaches, so its decode
  // steps do not allocate (a fork of a cached prefix too).
  const uint32_t reserve =
      static_cast<uint32_t>(std::min<uint64_t>(req.prompt.size() + req.gen, UINT32_MAX));
  if (!s.twin && !s.retried) {
    std::optional<std::unique_ptr<RemoteSession>> hit =
        remote_prefix_.Lookup(PrefixKey(req, &req.sampling), req.prompt, req.prompt.size() - 1,
                              options_.min_prefix_tokens, reserve);
    metrics_.PrefixLookup(hit.has_value(), hit ? (*hit)->CacheLength() : 0);
    if (hit) {
      s.prefix_reused = (*hit)->CacheLength();
      s.remote = std::move(*hit);
      return Status::Ok();
    }
  }
  LOCKSTEP_ASSIGN_OR_RETURN(s.remote, cluster_->OpenSession(req.window, req.sampling, false, reserve));
  return Status::Ok();
}

void Scheduler::Admit(std::unique_ptr<Session> s) {
  active_.push_back(std::move(s));
  Session& a = *active_.back();
  const Status st = cluster_ != nullptr ? OpenCluster(a) : OpenLocal(a);
  if (!st.ok()) return Failed(a, st);
  StartDecode(a, a.prefix_reused);
}

void Scheduler::StartDecode(Session& s, size_t cached) {
  s.decode.emplace(*s.backend(), s.spec.request, seed_, StopRuleOf(s), cached);
  if (!s.spec.speculative) return;
  std::unique_ptr<ProposalSource> source;  // null: prompt lookup
  if (draft_.stage != nullptr) {
    source = std::make_unique<DraftProposals>(*draft_.stage, draft_.max_positions, DraftPositions(s.spec));
  }
  s.speculator.emplace(s.spec.request.prompt, SpeculativeOptions{}, std::move(source));
}

StopRule Scheduler::StopRuleOf(const Session& s) const {
  StopRule stop{eos_, {}};
  if (s.spec.stop.empty() || tokenizer_ == nullptr) return stop;
  stop.text = [this, &s](std::span<const uint32_t> generated) {
    const std::string text =
        tokenizer_->Decode(std::vector<uint32_t>(generated.begin(), generated.end()));
    return std::any_of(s.spec.stop.begin(), s.spec.stop.end(),
                       [&](const std::string& x) { return text.find(x) != std::string::npos; });
  };
  return stop;
}

void Scheduler::Step() {
  batch_.clear();
  batched_.clear();
  alone_.clear();
  for (size_t i = 0; i < active_.size(); ++i) {
    Session& s = *active_[i];
    const bool alone = s.speculator && !s.decode->prefilling();
    (alone ? alone_ : batched_).push_back(i);
    if (!alone) batch_.push_back(&*s.decode);
  }
  status_.assign(batch_.size(), Status::Ok());
  const auto t0 = Clock::now();
  BatchStepper& stepper = stepper_ ? *stepper_ : *local_stepper_;
  size_t stepped = batch_.empty() ? 0 : stepper.Step(batch_, options_.prefill_chunk, status_);
  step_status_.assign(active_.size(), Status::Ok());
  for (size_t k = 0; k < batched_.size(); ++k) step_status_[batched_[k]] = status_[k];
  for (const size_t i : alone_) {  // past the prompt: one multi-row step each
    Session& s = *active_[i];
    if (s.decode->done()) continue;
    const SpeculativeStats before = s.speculator->stats();
    step_status_[i] = StepSpeculatively(*s.decode, *s.speculator, options_.prefill_chunk);
    const SpeculativeStats& after = s.speculator->stats();
    metrics_.Speculation(after.proposed - before.proposed, after.accepted - before.accepted);
    ++stepped;
  }
  if (stepped > 0) {
    metrics_.Step(stepped, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  for (size_t i = 0; i < active_.size(); ++i) AfterStep(*active_[i], step_status_[i]);
}

void Scheduler::AfterStep(Session& s, const Status& st) {
  DecodeSession& d = *s.decode;
  const DecodeRequest& req = s.spec.request;
  if (!st.ok()) return Failed(s, st);
  const auto now = Clock::now();
  for (; s.pushed < d.steps(); ++s.pushed) {
    if (s.twin) continue;
    const auto since = now - (s.pushed == 0 ? s.submitted : s.last_token);
    const double seconds = std::chrono::duration<double>(since).count();
    if (s.pushed == 0) {
      metrics_.TimeToFirstToken(seconds);
    } else {
      metrics_.InterToken(seconds);
    }
    s.stream->PushToken(d.generated()[s.pushed]);
  }
  if (d.steps() > 0) s.last_token = now;
  // The prompt just completed and nothing evicted yet: the cache holds
  // exactly the prompt, a prefix for later requests.
  const bool whole_prompt = d.steps() == 1 && s.backend()->CacheLength() == req.prompt.size();
  if (whole_prompt && !s.twin && req.prompt.size() >= options_.min_prefix_tokens) {
    if (s.local) {
      prefix_.Insert(PrefixKey(req), req.prompt, s.local->cache());
      metrics_.SetPrefixBytes(prefix_.bytes());
    } else {
      remote_prefix_.Insert(PrefixKey(req, &req.sampling), req.prompt, s.remote);
      metrics_.SetPrefixBytes(remote_prefix_.bytes());
    }
  }
  if (!d.done()) return;
  Retire(s, d.end() == DecodeSession::End::kStop ? "stop" : "length", "");
}

void Scheduler::Failed(Session& s, const Status& st) {
  const bool overloaded = st.kind() == ErrorKind::kOverloaded;
  // Workers at their limits: what the prefix cache holds there goes first.
  if (overloaded && s.remote) remote_prefix_.DropOldest();
  const DecodeRequest& req = s.spec.request;
  if (s.remote && s.prefix_reused > 0 && s.decode && s.decode->steps() == 0 && !s.retried) {
    // The prefix's session is gone from a worker: never again, and this
    // prompt is computed afresh.
    remote_prefix_.Forget(PrefixKey(req, &req.sampling),
                          std::span<const uint32_t>(req.prompt).first(s.prefix_reused));
    metrics_.SetPrefixBytes(remote_prefix_.bytes());
    s.retried = true;
    s.decode.reset();
    s.remote.reset();
    s.prefix_reused = 0;
    if (const Status open = OpenCluster(s); open.ok()) {
      StartDecode(s, 0);
      return;
    }
  }
  Retire(s, "error", st.ToString(), overloaded);
}

void Scheduler::ReportStages() {
  const WireStats wire = cluster_->stats();
  metrics_.SetWire(wire.bytes_sent, wire.bytes_received);
  const std::vector<StageReport> reports = cluster_->stage_reports();
  std::vector<double> seconds;
  std::vector<Metrics::Hop> hops{{"coordinator->0", wire.bytes_sent}};
  for (size_t k = 0; k < reports.size(); ++k) {
    seconds.push_back(static_cast<double>(reports[k].compute_nanos) * 1e-9);
    if (k + 1 < reports.size()) {
      hops.push_back({std::to_string(k) + "->" + std::to_string(k + 1), reports[k].bytes_to_next});
    }
  }
  hops.push_back({std::to_string(reports.size() - 1) + "->coordinator", wire.bytes_received});
  metrics_.SetStages(std::move(seconds), std::move(hops));
}

void Scheduler::Retire(Session& s, std::string reason, std::string error, bool overloaded) {
  if (s.finished) return;
  s.finished = true;
  Finish f;
  f.reason = std::move(reason);
  f.error = std::move(error);
  f.overloaded = overloaded;
  if (s.decode) {
    f.result = s.decode->result();
  } else {
    f.result.prompt = s.spec.request.prompt;
    f.result.cis2_ref = WitnessChain(seed_, f.result.prompt).Finalize();
    f.result.argmax_digest = ArgmaxDigest(f.result.prompt, {});
  }
  f.prefix_reused = s.prefix_reused;
  s.decode.reset();
  s.local.reset();   // the KV goes now, not when the client reads
  s.remote.reset();  // released on every worker
  {
    std::lock_guard<std::mutex> l(mu_);
    sessions_ -= 1;
    reserved_bytes_ -= s.reserved_bytes;
  }
  if (!s.twin) metrics_.Tokens(s.spec.request.prompt.size(), f.result.generated.size());
  if (!s.pair) {
    s.stream->Close(std::move(f));
    return;
  }
  s.pair->finish[s.twin ? 1 : 0] = std::move(f);
  if (s.pair->finish[0] && s.pair->finish[1]) {
    Finish answer = std::move(*s.pair->finish[0]);
    answer.determinism_ok = SameRun(answer, *s.pair->finish[1]);
    s.stream->Close(std::move(answer));
  }
}

}  // namespace lockstep::server
