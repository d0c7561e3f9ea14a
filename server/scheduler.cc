#include "server/scheduler.h"

#include <algorithm>
#include <bit>
#include <future>
#include <iostream>

#include "engine/ops/fp_env.h"
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
std::string PrefixKey(const GenerationSpec& spec, const SamplingParams* fixed = nullptr) {
  std::string key = "window=" + std::to_string(spec.window.value_or(-1));
  if (fixed == nullptr) return key;
  const SamplingParams& sampling = *fixed;
  key += " t=" + std::to_string(std::bit_cast<uint32_t>(sampling.temperature)) +
         " k=" + std::to_string(sampling.top_k) +
         " p=" + std::to_string(std::bit_cast<uint32_t>(sampling.top_p)) +
         " seed=" + std::to_string(sampling.seed);
  return key;
}

// KV bytes one position takes over every layer, wherever they live.
uint64_t KvBytesPerPosition(const SchedulerBackend& backend) {
  if (backend.stage != nullptr) {
    KvCache one = backend.stage->NewCache();
    one.Append(1, 0);
    return KvBytesOf(one);
  }
  const ModelConfig& c = backend.cluster->model_config();  // KvBytesOf's sum over all layers
  const uint64_t kv_width = static_cast<uint64_t>(c.num_kv_heads) * c.head_dim;
  return 3 * static_cast<uint64_t>(c.num_layers) * kv_width * sizeof(float) + sizeof(int64_t);
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

  std::optional<KvCache> cache;           // in-process
  std::unique_ptr<RemoteSession> remote;  // on a cluster
  SamplingParams remote_sampling;         // what `remote` was opened with
  std::vector<float> remote_logits;  // --ship-logits: FeedAndChoose fills it
  StepOutcome outcome;               // of the last step fed on the cluster
  std::optional<WitnessChain> chain;
  size_t fed = 0;  // prompt tokens in the cache
  uint32_t prefix_reused = 0;
  std::vector<uint32_t> generated;
  std::vector<Digest> logits_sha256;  // per step
  uint32_t next_token[1] = {0};
  std::vector<float> hidden;
  SamplingScratch sampling;
  size_t step_tokens = 0;  // tokens fed in the current step
  bool finished = false;
};

Scheduler::Scheduler(SchedulerBackend backend, const WitnessSeed& seed, const Tokenizer* tokenizer,
                     std::vector<uint32_t> eos, SchedulerOptions options, Metrics& metrics)
    : stage_(backend.stage),
      cluster_(backend.cluster),
      seed_(seed),
      tokenizer_(tokenizer),
      eos_(std::move(eos)),
      options_(options),
      metrics_(metrics),
      bytes_per_position_(KvBytesPerPosition(backend)),
      prefix_(options.prefix_budget_bytes, bytes_per_position_),
      remote_prefix_(options.prefix_budget_bytes, bytes_per_position_) {
  if (cluster_ != nullptr) metrics_.SetSource([this] { ReportStages(); });
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
  const uint64_t need =
      (spec.prompt.size() + spec.max_tokens) * bytes_per_position_ * static_cast<uint64_t>(runs);
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
    for (const auto& s : active_) waiting += s->fed == 0 ? 1 : 0;
    metrics_.SetQueue(waiting, active_.size());
  }
  metrics_.SetQueue(0, 0);
}

void Scheduler::Admit(std::unique_ptr<Session> s) {
  const GenerationSpec& spec = s->spec;
  s->chain.emplace(seed_, spec.prompt);
  if (cluster_ != nullptr) return AdmitCluster(std::move(s));
  std::optional<KvCache> hit;
  if (!s->twin) {
    hit = prefix_.Lookup(PrefixKey(spec), spec.prompt, spec.prompt.size() - 1, options_.min_prefix_tokens);
    metrics_.PrefixLookup(hit.has_value(), hit ? hit->size() : 0);
  }
  if (hit) {
    s->fed = hit->size();
    s->prefix_reused = static_cast<uint32_t>(hit->size());
    s->cache = std::move(hit);
  } else {
    s->cache = stage_->NewCache();
    if (spec.window) {
      for (int l = s->cache->lo(); l < s->cache->hi(); ++l) {
        if (Status st = s->cache->SetWindow(l, *spec.window); !st.ok()) {
          active_.push_back(std::move(s));
          Retire(*active_.back(), "error", st.ToString());
          return;
        }
      }
    }
  }
  s->cache->Reserve(spec.prompt.size() + spec.max_tokens);
  active_.push_back(std::move(s));
}

void Scheduler::AdmitCluster(std::unique_ptr<Session> s) {
  const GenerationSpec& spec = s->spec;
  s->remote_sampling = ClusterSampling(spec.sampling);
  if (!s->twin) {
    std::optional<std::unique_ptr<RemoteSession>> hit =
        remote_prefix_.Lookup(PrefixKey(spec, &s->remote_sampling), spec.prompt,
                              spec.prompt.size() - 1, options_.min_prefix_tokens);
    metrics_.PrefixLookup(hit.has_value(), hit ? (*hit)->CacheLength() : 0);
    if (hit) {
      s->fed = (*hit)->CacheLength();
      s->prefix_reused = static_cast<uint32_t>(s->fed);
      s->remote = std::move(*hit);
      active_.push_back(std::move(s));
      return;
    }
  }
  Result<std::unique_ptr<RemoteSession>> r = cluster_->OpenSession(spec.window, s->remote_sampling);
  active_.push_back(std::move(s));
  if (!r.ok()) {
    Retire(*active_.back(), "error", r.status().ToString());
  } else {
    active_.back()->remote = std::move(*r);
  }
}

std::span<const uint32_t> Scheduler::StepTokens(Session& s, size_t* budget) {
  if (s.fed >= s.spec.prompt.size()) return s.next_token;
  const size_t n = std::min(*budget, s.spec.prompt.size() - s.fed);
  *budget -= n;
  return std::span<const uint32_t>(s.spec.prompt).subspan(s.fed, n);
}

void Scheduler::StepCluster() {
  std::vector<Session*> batch;
  std::vector<std::future<Status>> replies;
  size_t budget = options_.prefill_chunk;
  const auto t0 = Clock::now();
  for (auto& sp : active_) {
    Session& s = *sp;
    const std::span<const uint32_t> tokens = StepTokens(s, &budget);
    if (tokens.empty()) continue;
    s.step_tokens = tokens.size();
    batch.push_back(&s);
    // A step that completes the prompt, or decodes, yields a token: the
    // pipeline chooses it where the logits are (FeedAndChoose).
    const bool chooses = s.fed + tokens.size() >= s.spec.prompt.size();
    // Every session's step is in flight at once, so the workers find them
    // queued together and batch them.
    if (!chooses) {  // a prompt chunk before the last: no output, no reply to wait for
      replies.push_back(std::async(std::launch::deferred,
                                   [&s, tokens] { return s.remote->FeedWithoutOutput(tokens); }));
      continue;
    }
    replies.push_back(std::async(std::launch::async, [&s, tokens] {
      const StepContext ctx{static_cast<uint32_t>(s.generated.size()), s.remote_sampling,
                            &*s.chain, &s.sampling, &s.remote_logits};
      Result<StepOutcome> o = s.remote->FeedAndChoose(tokens, ctx);
      if (!o.ok()) return o.status();
      s.outcome = *o;
      return Status::Ok();
    }));
  }
  std::vector<Status> got;
  for (auto& r : replies) got.push_back(r.get());
  if (batch.empty()) return;
  metrics_.Step(batch.size(), std::chrono::duration<double>(Clock::now() - t0).count());
  for (size_t i = 0; i < batch.size(); ++i) {
    Session& s = *batch[i];
    if (!got[i].ok()) {
      Retire(s, "error", got[i].ToString());
      continue;
    }
    const bool prefilling = s.fed < s.spec.prompt.size();
    if (prefilling) s.fed += s.step_tokens;
    if (prefilling && s.fed < s.spec.prompt.size()) continue;  // more chunks to come
    if (prefilling && !s.twin && s.spec.prompt.size() >= options_.min_prefix_tokens) {
      remote_prefix_.Insert(PrefixKey(s.spec, &s.remote_sampling), s.spec.prompt, s.remote);
      metrics_.SetPrefixBytes(remote_prefix_.bytes());
    }
    OnOutcome(s, s.outcome);
  }
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

void Scheduler::Step() {
  if (cluster_ != nullptr) return StepCluster();
  std::vector<Stage::BatchItem> items;
  std::vector<Session*> batch;
  size_t budget = options_.prefill_chunk;
  for (auto& sp : active_) {
    Session& s = *sp;
    const std::span<const uint32_t> tokens = StepTokens(s, &budget);
    if (tokens.empty()) continue;
    if (Status st = stage_->Embed(tokens, &s.hidden); !st.ok()) {
      Retire(s, "error", st.ToString());
      continue;
    }
    s.step_tokens = tokens.size();
    items.push_back({s.hidden, static_cast<int64_t>(s.cache->size()), &*s.cache});
    batch.push_back(&s);
  }
  if (batch.empty()) return;
  const auto t0 = Clock::now();
  if (Status st = stage_->ForwardBatch(items, scratch_); !st.ok()) {
    for (Session* s : batch) Retire(*s, "error", st.ToString());
    return;
  }
  const size_t h = stage_->hidden(), vocab = stage_->vocab();
  std::vector<Session*> emitting;
  rows_.clear();
  for (Session* s : batch) {
    const bool prefilling = s->fed < s->spec.prompt.size();
    if (prefilling) s->fed += s->step_tokens;
    if (prefilling && s->fed < s->spec.prompt.size()) continue;  // more chunks to come
    if (prefilling && !s->twin && s->spec.prompt.size() >= options_.min_prefix_tokens) {
      prefix_.Insert(PrefixKey(s->spec), s->spec.prompt, *s->cache);
      metrics_.SetPrefixBytes(prefix_.bytes());
    }
    const float* last = s->hidden.data() + (s->step_tokens - 1) * h;
    rows_.insert(rows_.end(), last, last + h);
    emitting.push_back(s);
  }
  logits_.resize(emitting.size() * vocab);
  if (!emitting.empty()) stage_->LogitsBatch(rows_, logits_, scratch_);
  metrics_.Step(batch.size(), std::chrono::duration<double>(Clock::now() - t0).count());
  // Every session's choice and digests at once, on the stage's threads;
  // then their effects (tokens out, retirements) in batch order.
  outcomes_.resize(emitting.size());
  choices_.clear();
  for (size_t i = 0; i < emitting.size(); ++i) {
    Session& s = *emitting[i];
    choices_.push_back({std::span<const float>(logits_.data() + i * vocab, vocab), &s.spec.sampling,
                        static_cast<uint32_t>(s.generated.size()), &*s.chain, &s.sampling,
                        &outcomes_[i]});
  }
  ChooseAndWitnessAll(choices_, stage_->pool());
  for (size_t i = 0; i < emitting.size(); ++i) OnOutcome(*emitting[i], outcomes_[i]);
}

void Scheduler::OnOutcome(Session& s, const StepOutcome& o) {
  const uint32_t step = static_cast<uint32_t>(s.generated.size());
  const uint32_t token = o.token;
  s.logits_sha256.push_back(o.logits_sha256);
  s.generated.push_back(token);
  const auto now = Clock::now();
  if (!s.twin) {
    const auto since = now - (step == 0 ? s.submitted : s.last_token);
    const double seconds = std::chrono::duration<double>(since).count();
    if (step == 0) {
      metrics_.TimeToFirstToken(seconds);
    } else {
      metrics_.InterToken(seconds);
    }
    s.stream->PushToken(token);
  }
  s.last_token = now;
  for (const EvictSpec& e : s.spec.evictions) {
    if (e.step != step) continue;
    const Status st = s.remote ? s.remote->Evict(e.from, e.count) : s.cache->Evict(e.from, e.count);
    if (!st.ok()) {
      Retire(s, "error",
             "evict " + std::to_string(e.from) + ":" + std::to_string(e.count) + "@" +
                 std::to_string(e.step) + ": " + st.ToString());
      return;
    }
  }
  if (std::find(eos_.begin(), eos_.end(), token) != eos_.end()) return Retire(s, "stop", "");
  if (!s.spec.stop.empty() && tokenizer_ != nullptr) {
    const std::string text = tokenizer_->Decode(s.generated);
    for (const std::string& stop : s.spec.stop) {
      if (text.find(stop) != std::string::npos) return Retire(s, "stop", "");
    }
  }
  if (s.generated.size() >= s.spec.max_tokens) return Retire(s, "length", "");
  s.next_token[0] = token;
}

void Scheduler::Retire(Session& s, std::string reason, std::string error) {
  if (s.finished) return;
  s.finished = true;
  Finish f;
  f.reason = std::move(reason);
  f.error = std::move(error);
  f.result.prompt = s.spec.prompt;
  f.result.generated = s.generated;
  f.result.logits_sha256 = s.logits_sha256;
  f.result.cis2_ref = s.chain->Finalize();
  f.result.argmax_digest = ArgmaxDigest(s.spec.prompt, s.generated);
  f.prefix_reused = s.prefix_reused;
  s.cache.reset();  // the KV goes now, not when the client reads
  s.remote.reset();  // released on every worker
  s.hidden = {};
  {
    std::lock_guard<std::mutex> l(mu_);
    sessions_ -= 1;
    reserved_bytes_ -= s.reserved_bytes;
  }
  if (!s.twin) metrics_.Tokens(s.spec.prompt.size(), s.generated.size());
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
