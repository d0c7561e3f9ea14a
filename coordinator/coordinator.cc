#include "coordinator/coordinator.h"

#include <algorithm>
#include <bit>
#include <deque>
#include <iostream>

#include "base/step_timeline.h"
#include "coordinator/coordinator_impl.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr milliseconds kMaxPoll{100};
constexpr int kMaxReceivesPerWake = 64;

}  // namespace

// ---- Coordinator: what callers use ---------------------------------------------

std::string WorkerInfo::Describe() const {
  return "worker " + endpoint + " (stage " + std::to_string(index) + ", layers [" +
         std::to_string(spec.lo) + "," + std::to_string(spec.hi) + "))";
}


Coordinator::Coordinator(std::unique_ptr<zmq::context_t> owned) : owned_context_(std::move(owned)) {}

Coordinator::~Coordinator() = default;

Result<std::unique_ptr<Coordinator>> Coordinator::Start(const ClusterConfig& config,
                                                        ModelInfo model) {
  std::unique_ptr<Coordinator> c(new Coordinator(std::make_unique<zmq::context_t>(1)));
  LOCKSTEP_ASSIGN_OR_RETURN(c->impl_,
                            CoordinatorImpl::Start(*c->owned_context_, config, std::move(model)));
  return c;
}

Result<std::unique_ptr<Coordinator>> Coordinator::Start(zmq::context_t& context,
                                                        const ClusterConfig& config,
                                                        ModelInfo model) {
  std::unique_ptr<Coordinator> c(new Coordinator(nullptr));
  LOCKSTEP_ASSIGN_OR_RETURN(c->impl_, CoordinatorImpl::Start(context, config, std::move(model)));
  return c;
}

Result<std::unique_ptr<Coordinator>> Coordinator::Start(zmq::context_t& context,
                                                        const ClusterConfig& config) {
  LOCKSTEP_ASSIGN_OR_RETURN(ModelInfo model, InspectModelDir(config.model_dir, config.pins));
  return Start(context, config, std::move(model));
}

const ModelConfig& Coordinator::model_config() const { return impl_->model().config; }
const ModelFiles& Coordinator::model_files() const { return impl_->model().files; }
const WitnessSeed& Coordinator::seed() const { return impl_->seed(); }
const std::vector<WorkerInfo>& Coordinator::workers() const { return impl_->workers(); }
std::vector<StageState> Coordinator::stages() const { return impl_->stages(); }
std::string Coordinator::plan_text() const { return impl_->plan_text(); }
void Coordinator::ShutdownWorkers(const std::string& reason) { impl_->ShutdownWorkers(reason); }
Status Coordinator::health() const { return impl_->health(); }
WireStats Coordinator::stats() const { return impl_->stats(); }
std::vector<StageReport> Coordinator::stage_reports() const { return impl_->stage_reports(); }

std::future<Coordinator::ReplyResult> Coordinator::Request(uint64_t session, uint32_t step,
                                                            wire::Frame frame, uint32_t relay) {
  return impl_->Request(session, step, std::move(frame), relay);
}
std::future<Coordinator::ReplyResult> Coordinator::Expect(uint64_t session, uint32_t step) {
  return impl_->Expect(session, step);
}
void Coordinator::Post(uint64_t session, wire::Frame frame, bool release) {
  impl_->Post(session, std::move(frame), release);
}
Coordinator::ReplyResult Coordinator::Await(std::future<ReplyResult> reply, uint64_t session,
                                            uint32_t step) {
  return impl_->Await(std::move(reply), session, step);
}
uint64_t Coordinator::NewSessionId() { return impl_->NewSessionId(); }
uint64_t Coordinator::epoch() const { return impl_->epoch(); }
Status Coordinator::AwaitRecovery() const { return impl_->AwaitRecovery(); }
bool Coordinator::ship_logits() const { return impl_->config().ship_logits; }
milliseconds Coordinator::request_timeout() const { return impl_->config().request_timeout; }
milliseconds Coordinator::wait_bound() const { return impl_->wait_bound(); }
uint64_t Coordinator::recoveries() const { return impl_->recoveries(); }

Result<std::unique_ptr<RemoteSession>> Coordinator::OpenSession(std::optional<int> window,
                                                                const SamplingParams& sampling,
                                                                bool trace,
                                                                uint32_t reserve_positions) {
  if (window && *window < 0) return InvalidError("--window must be >= 0");
  LOCKSTEP_RETURN_IF_ERROR(ValidateSamplingParams(sampling));
  LOCKSTEP_RETURN_IF_ERROR(health());
  wire::SessionOpen open;
  open.session_id = NewSessionId();
  open.trace = trace;
  open.reserve_positions = reserve_positions;
  open.sampling = wire::Sampling{std::bit_cast<uint32_t>(sampling.temperature), sampling.top_k,
                                 std::bit_cast<uint32_t>(sampling.top_p), sampling.seed};
  if (window) {
    open.window.kind = wire::WindowSpec::Kind::kGlobal;
    open.window.global = static_cast<uint32_t>(*window);
  } else {
    const ModelConfig& config = impl_->model().config;
    const auto& w = config.layer_window;
    if (std::any_of(w.begin(), w.end(), [](int x) { return x != 0; })) {
      open.window.kind = wire::WindowSpec::Kind::kPerLayer;
      open.window.per_layer.assign(static_cast<size_t>(config.num_layers), 0);
      for (size_t l = 0; l < w.size() && l < open.window.per_layer.size(); ++l) {
        open.window.per_layer[l] = static_cast<uint32_t>(w[l]);
      }
    }
  }
  const uint64_t epoch = impl_->epoch();
  Post(open.session_id, wire::MarshalMessage(open), false);
  return std::make_unique<RemoteSession>(*this, open, sampling, epoch);
}

// ---- CoordinatorImpl: the loop (whichever thread runs it) -----------------------

// ---- sessions (any thread) ----------------------------------------------------

std::future<CoordinatorImpl::ReplyResult> CoordinatorImpl::Request(uint64_t session, uint32_t step,
                                                            wire::Frame frame, uint32_t relay) {
  auto promise = std::make_shared<std::promise<ReplyResult>>();
  std::future<ReplyResult> future = promise->get_future();
  inbox_.Push(
      Command{Command::Kind::kRequest, session, step, false, std::move(frame), promise, relay});
  return future;
}

std::future<CoordinatorImpl::ReplyResult> CoordinatorImpl::Expect(uint64_t session, uint32_t step) {
  auto promise = std::make_shared<std::promise<ReplyResult>>();
  std::future<ReplyResult> future = promise->get_future();
  inbox_.Push(Command{Command::Kind::kExpect, session, step, false, {}, promise});
  return future;
}

void CoordinatorImpl::Post(uint64_t session, wire::Frame frame, bool release) {
  inbox_.Push(Command{Command::Kind::kPost, session, 0, release, std::move(frame), nullptr});
}

void CoordinatorImpl::ShutdownWorkers(const std::string& reason) {
  inbox_.Push(Command{Command::Kind::kShutdownWorkers, 0, 0, false,
                      wire::MarshalMessage(wire::Shutdown{reason}), nullptr});
}

// ---- I/O thread -----------------------------------------------------------------

milliseconds CoordinatorImpl::NextWake(Clock::time_point now) const {
  Clock::time_point next = now + kMaxPoll;
  for (const Link& l : links_) {
    next = std::min(next, l.last_heartbeat + config_.heartbeat);
    if (l.liveness.DeathTime() > now) next = std::min(next, l.liveness.DeathTime());
  }
  next = replies_.NextDeadline(next);
  if (auto deadline = recovery_.deadline()) next = std::min(next, *deadline);
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(next - now));
}

// ---- who runs the loop ------------------------------------------------------------

void CoordinatorImpl::IoMain() {
  for (;;) {
    baton_.TakeForIoThread();
    for (;;) {
      if (stopped_ || !Turn(NextWake(Clock::now()))) return baton_.Drop();
      // Nothing to see through: the next session thread to wait for a
      // reply may run the loop itself.
      if (!Outstanding() && baton_.LetGoFromIoThread()) break;
    }
  }
}

bool CoordinatorImpl::Outstanding() const {
  return replies_.awaiting() || recovery_.recovering() || !deferred_.empty();
}

CoordinatorImpl::ReplyResult CoordinatorImpl::Await(std::future<ReplyResult> reply, uint64_t session,
                                            uint32_t step) {
  const auto until = Clock::now() + wait_bound();
  if (baton_.TakeForSession()) {
    while (!stopped_ && reply.wait_for(milliseconds(0)) != std::future_status::ready) {
      const auto now = Clock::now();
      if (now >= until) break;
      const auto left = std::chrono::ceil<milliseconds>(until - now);
      (void)Turn(std::min(NextWake(now), left), &reply);
    }
    baton_.LetGoFromSession(Outstanding() || stopped_);
  } else {
    (void)reply.wait_until(until);
    baton_.DoneWaiting();
  }
  if (reply.wait_for(milliseconds(0)) != std::future_status::ready) {
    return TimeoutError("session " + std::to_string(session) + " step " + std::to_string(step) +
                        ": the coordinator did not answer within " +
                        std::to_string(wait_bound().count()) + " ms");
  }
  return reply.get();
}

// ---- the I/O loop (whichever thread runs it) ------------------------------------

namespace {
bool Ready(const std::future<CoordinatorImpl::ReplyResult>* f) {
  return f != nullptr && f->wait_for(milliseconds(0)) == std::future_status::ready;
}
}  // namespace

bool CoordinatorImpl::Turn(milliseconds wait, const std::future<ReplyResult>* awaited) {
  const size_t n = links_.size();
  items_.resize(n + 1);
  for (size_t k = 0; k < n; ++k) items_[k] = {links_[k].client.socket().handle(), 0, ZMQ_POLLIN, 0};
  items_[n] = {nullptr, inbox_.fd(), ZMQ_POLLIN, 0};
  const int rc = zmq_poll(items_.data(), static_cast<int>(n + 1), wait.count());
  if (rc < 0 && zmq_errno() == ETERM) {
    replies_.FailAll(DisconnectedError("coordinator: zmq context terminated"));
    stopped_ = true;
    return false;
  }
  for (size_t k = 0; k < n; ++k) {
    if (rc > 0 && (items_[k].revents & ZMQ_POLLIN)) ReceiveFrom(k, awaited);
    if (Ready(awaited)) return true;  // the inbox and the timers at the next turn
  }
  if (rc > 0 && (items_[n].revents & ZMQ_POLLIN)) {
    std::deque<Command> commands = inbox_.Drain();
    for (size_t i = 0; i < commands.size(); ++i) {
      if (commands[i].kind != Command::Kind::kStop) {
        OnCommand(commands[i]);
        continue;
      }
      const Status st = DisconnectedError("coordinator stopped");
      replies_.FailAll(st);
      for (size_t j = i + 1; j < commands.size(); ++j) {  // never sent: fail them too
        if (commands[j].promise) commands[j].promise->set_value(st);
      }
      stopped_ = true;
      return false;
    }
  }
  Tick(Clock::now());
  return true;
}

Status CoordinatorImpl::Admissible(uint64_t session) {
  Status st = health();
  if (st.ok() && recovery_.recovering()) {
    st = DisconnectedError(Describe(recovery_.rebuilding()) + " is being rebuilt on a spare");
  }
  if (!st.ok()) return st;
  return replies_.TakeSticky(session);
}

void CoordinatorImpl::OnCommand(Command& c) {
  switch (c.kind) {
    case Command::Kind::kRequest: {
      Status st = Admissible(c.session);
      timeline::Mark(timeline::Event::kCoordinatorSend, 0, c.session, c.step);
      if (st.ok()) st = SendTo(0, c.frame);
      if (!st.ok()) return c.promise->set_value(st);
      replies_.Sent(c.session, c.step, c.relay, Clock::now() + config_.request_timeout, c.promise);
      return;
    }
    case Command::Kind::kExpect:
      return OnExpect(c);
    case Command::Kind::kPost:
      if (c.release) replies_.Release(c.session);
      if (recovery_.recovering()) {
        deferred_.push_back(std::move(c.frame));  // sent once the pipeline is whole
      } else if (health().ok()) {
        (void)SendTo(0, c.frame);
      }
      return;
    case Command::Kind::kShutdownWorkers:
      recovery_.OnWorkersShutDown();  // workers that exit now are not rebuilt on spares
      for (size_t k = 0; k < links_.size(); ++k) (void)SendTo(k, c.frame);
      return;
    case Command::Kind::kStop:
      return;
  }
}

void CoordinatorImpl::OnExpect(Command& c) {
  Result<std::optional<wire::StepResult>> early = replies_.TakeRelayed(c.session, c.step);
  if (!early.ok()) return c.promise->set_value(early.status());
  if (early->has_value()) return c.promise->set_value(SessionLink::StepReply(std::move(**early)));
  // A relayed step's own error came before this expectation: it is sticky.
  if (Status st = Admissible(c.session); !st.ok()) return c.promise->set_value(st);
  replies_.Await(c.session, c.step, Clock::now() + config_.request_timeout, c.promise);
}

void CoordinatorImpl::ReceiveFrom(size_t k, const std::future<ReplyResult>* awaited) {
  for (int i = 0; i < kMaxReceivesPerWake && !Ready(awaited); ++i) {
    Result<wire::Incoming> in = links_[k].client.Receive(milliseconds(0));
    if (!in.ok()) return;
    links_[k].liveness.OnReceived(Clock::now());
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.bytes_received += in->body.size();
      stats_.frames_received += 1;
    }
    OnMessage(k, *in);
  }
}

void CoordinatorImpl::OnMessage(size_t k, const wire::Incoming& in) {
  const uint64_t received = timeline::NowIfEnabled();
  Result<wire::Message> parsed = wire::ParseMessage(in.bytes());
  if (!parsed.ok()) {
    const Status st = parsed.status().WithContext("frame from " + Describe(k));
    if (std::optional<uint64_t> session = wire::SessionOfRefusedFrame(in.bytes())) {
      return replies_.Fail(*session, st);
    }
    std::cerr << "lockstep coordinator: " << st.ToString() << "\n";
    return;
  }
  if (auto* hb = std::get_if<wire::Heartbeat>(&*parsed)) {
    std::lock_guard<std::mutex> lock(mu_);
    if (reports_.size() <= k) reports_.resize(k + 1);
    reports_[k] = StageReport{hb->compute_nanos, hb->bytes_to_next};
    return;
  }
  if (OnRecoveryMessage(k, *parsed)) return;
  if (auto* logits = std::get_if<wire::Logits>(&*parsed)) {
    timeline::MarkAt(timeline::Event::kCoordinatorReceive, 0, logits->session_id, logits->step,
                     received);
    return replies_.OnLogits(std::move(*logits));
  }
  if (auto* result = std::get_if<wire::StepResult>(&*parsed)) {
    timeline::MarkAt(timeline::Event::kCoordinatorReceive, 0, result->session_id, result->step,
                     received);
    return replies_.OnStepResult(std::move(*result));
  }
  if (auto* err = std::get_if<wire::ErrorReport>(&*parsed)) {
    const Status st = err->ToStatus();
    if (!err->has_session) return replies_.FailAll(st);
    replies_.OnSessionError(err->session_id, st);
  }
}

void CoordinatorImpl::Tick(Clock::time_point now) {
  const wire::Frame heartbeat = wire::MarshalMessage(wire::Heartbeat{0, "coordinator"});
  const auto failed = [&] { return recovery_.state() == RecoveryMachine::State::kFailed; };
  for (size_t k = 0; k < links_.size() && !failed(); ++k) {
    Link& l = links_[k];
    if (now - l.last_heartbeat >= config_.heartbeat) {
      l.last_heartbeat = now;
      (void)SendTo(k, heartbeat);
    }
    if (Status refused = l.monitor.Check(); !refused.ok()) l.refused = refused;
    if (l.monitor.TakeDisconnected() && health().ok()) {
      OnDead(k, DisconnectedError(Describe(k) + " closed its connection (the worker exited, or "
                                  "the link dropped and with it the frames in flight)"));
      continue;
    }
    if (l.liveness.IsDead(now) && health().ok()) {
      OnDead(k, DisconnectedError(Describe(k) + " stopped answering: nothing received for " +
                                  Ms(config_.heartbeat * config_.liveness) + " (heartbeat " +
                                  Ms(config_.heartbeat) + " x liveness " +
                                  std::to_string(config_.liveness) + ")" +
                                  (l.refused.ok() ? "" : "; " + l.refused.message())));
    }
  }
  if (!failed()) CheckRecovery(now);
  replies_.Expire(now, [&](uint64_t session, uint32_t step) {
    return TimeoutError("session " + std::to_string(session) + " step " + std::to_string(step) +
                        ": no answer from the pipeline " + plan_text() + " within " +
                        Ms(config_.request_timeout));
  });
}

}  // namespace lockstep
