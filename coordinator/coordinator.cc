#include "coordinator/coordinator.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <deque>
#include <iostream>

#include "base/step_timeline.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr milliseconds kMaxPoll{100};
// The I/O thread takes the loop back when no session thread has run it for
// this long (and at once when another request is outstanding): a session
// that decodes step after step keeps it, heartbeats are at most this late.
constexpr milliseconds kHandBack{20};
constexpr int kMaxReceivesPerWake = 64;

std::string Ms(milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

Status CompareDigest(const std::string& who, const char* what, const Digest& theirs,
                     const Digest& ours) {
  if (theirs == ours) return Status::Ok();
  return MismatchError(who + " refused: its " + what + " is " + ToHex(theirs) +
                       ", the coordinator's is " + ToHex(ours));
}

}  // namespace

std::string WorkerInfo::Describe() const {
  return "worker " + endpoint + " (stage " + std::to_string(index) + ", layers [" +
         std::to_string(spec.lo) + "," + std::to_string(spec.hi) + "))";
}

Coordinator::Coordinator(zmq::context_t& context, ClusterConfig config)
    : context_(context), config_(std::move(config)) {}

Coordinator::~Coordinator() {
  if (io_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(drive_mu_);
      stop_requested_ = true;
    }
    drive_cv_.notify_all();
    inbox_.Push(Command{Command::Kind::kStop, 0, 0, false, {}, nullptr});
    io_.join();
  }
  for (Link& l : links_) l.monitor.Stop();
}

Result<std::unique_ptr<Coordinator>> Coordinator::Start(zmq::context_t& context,
                                                        const ClusterConfig& config) {
  LOCKSTEP_ASSIGN_OR_RETURN(ModelInfo model, InspectModelDir(config.model_dir, config.pins));
  return Start(context, config, std::move(model));
}

Result<std::unique_ptr<Coordinator>> Coordinator::Start(zmq::context_t& context,
                                                        const ClusterConfig& config,
                                                        ModelInfo model) {
  std::unique_ptr<Coordinator> c(new Coordinator(context, config));
  if (!c->inbox_.ok()) return IoError("coordinator: eventfd failed");
  c->seed_ = model.Seed();
  c->model_ = std::move(model);
  // The plan is checked before any worker is contacted, let alone loads.
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<StageSpec> specs, ResolvePlan(config, c->model_));
  for (size_t k = 0; k < specs.size(); ++k) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::vector<FileDigest> files, StageWeightFiles(c->model_, specs[k]));
    std::vector<wire::WeightFile>& sent = c->weight_files_.emplace_back();
    for (const FileDigest& f : files) sent.push_back({f.file, f.sha256});
    c->workers_.push_back(WorkerInfo{k, config.workers[k], specs[k], {}, 0,
                                     k < config.worker_keys.size() ? config.worker_keys[k] : ""});
    c->endpoints_.push_back(config.workers[k]);
    c->keys_.push_back(k < config.worker_keys.size() ? config.worker_keys[k] : "");
  }
  LOCKSTEP_RETURN_IF_ERROR(c->Connect());
  LOCKSTEP_RETURN_IF_ERROR(c->Handshake(specs));
  // Disconnects while connecting and loading are the handshake's business.
  for (Link& l : c->links_) (void)l.monitor.TakeDisconnected();
  // Thread start is the happens-before edge handing the sockets over.
  c->io_ = std::thread([raw = c.get()] { raw->IoMain(); });
  return c;
}

std::string Coordinator::plan_text() const {
  std::vector<LayerRange> plan;
  for (const WorkerInfo& w : workers_) plan.push_back({w.spec.lo, w.spec.hi});
  return PlanText(plan);
}

milliseconds Coordinator::wait_bound() const {
  return config_.request_timeout + config_.heartbeat * config_.liveness + milliseconds(1000);
}

std::string Coordinator::Describe(size_t k) const {
  WorkerInfo w = workers_[k];
  w.endpoint = endpoints_[k];
  return w.Describe();
}

Status Coordinator::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

WireStats Coordinator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<StageReport> Coordinator::stage_reports() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StageReport> out = reports_;
  out.resize(workers_.size());
  return out;
}

// ---- handshake (caller's thread, before the I/O thread exists) --------------

Result<Coordinator::Link> Coordinator::MakeLink(const std::string& endpoint,
                                                const std::string& key) const {
  wire::TransportOptions transport;
  transport.send_timeout = milliseconds(0);  // the I/O thread never blocks on a peer
  transport.security.insecure = config_.insecure;
  transport.security.own = config_.key;
  transport.security.server_public_z85 = key;
  LOCKSTEP_ASSIGN_OR_RETURN(wire::Client client,
                            wire::Client::Connect(context_, endpoint, identity_, transport));
  LOCKSTEP_ASSIGN_OR_RETURN(LinkMonitor monitor,
                            LinkMonitor::Attach(context_, client.socket(), endpoint));
  const auto now = Clock::now();
  const wire::HeartbeatOptions hb{config_.heartbeat, config_.liveness};
  return Link{std::move(client), wire::PeerLiveness(hb, now), now, false, std::move(monitor), {}};
}

Status Coordinator::Connect() {
  identity_ = wire::UnguessableIdentity("coordinator");
  for (size_t k = 0; k < workers_.size(); ++k) {
    Result<Link> link = MakeLink(endpoints_[k], keys_[k]);
    if (!link.ok()) return link.status().WithContext(Describe(k));
    links_.push_back(std::move(link).value());
  }
  return Status::Ok();
}

wire::Assign Coordinator::MakeAssign(size_t k) const {
  const size_t n = workers_.size();
  const StageSpec& spec = workers_[k].spec;
  wire::Assign a;
  a.model_dir = config_.model_dir;
  a.expected_weights_sha256 = seed_.weights_sha256;
  a.expected_config_sha256 = seed_.config_sha256;
  a.expected_tokenizer_sha256 = seed_.tokenizer_sha256;
  a.layer_lo = static_cast<uint32_t>(spec.lo);
  a.layer_hi = static_cast<uint32_t>(spec.hi);
  a.is_first = spec.first;
  a.is_last = spec.last;
  a.next_hop = k + 1 < n ? endpoints_[k + 1] : "";
  a.worker_index = static_cast<uint32_t>(k);
  if (k + 1 < n) a.next_hop_key = keys_[k + 1];
  if (k > 0) a.upstream_key = keys_[k - 1];
  // The ring a relayed step takes back from the last stage to the first.
  if (n >= 2 && k + 1 == n) {
    a.ring_hop = endpoints_[0];
    a.ring_hop_key = keys_[0];
  }
  if (n >= 2 && k == 0) a.ring_upstream_key = keys_[n - 1];
  a.weight_files = weight_files_[k];
  return a;
}

Status Coordinator::SendTo(size_t k, std::span<const uint8_t> frame) {
  Status st = links_[k].client.Send(frame);
  if (!st.ok()) return DisconnectedError(Describe(k) + " cannot take messages: " + st.message());
  links_[k].liveness.OnSent(Clock::now());
  std::lock_guard<std::mutex> lock(mu_);
  stats_.bytes_sent += frame.size();
  stats_.frames_sent += 1;
  return Status::Ok();
}

// The first stage is claimed before the others: its Assign is followed by a
// probe heartbeat, answered after the worker admitted or refused the Assign
// (one I/O thread, in order). Coordinators racing for the same workers all
// start with the same first stage, so exactly one of them goes on to claim
// the rest, and the others fail without holding any worker.
Status Coordinator::Handshake(const std::vector<StageSpec>& specs) {
  constexpr uint64_t kClaimProbe = 0x636c61696dULL;  // "claim"
  const size_t n = specs.size();
  LOCKSTEP_RETURN_IF_ERROR(SendTo(0, wire::MarshalMessage(MakeAssign(0))));
  LOCKSTEP_RETURN_IF_ERROR(
      SendTo(0, wire::MarshalMessage(wire::Heartbeat{kClaimProbe, "coordinator"})));
  bool claimed = false;
  std::vector<bool> acked(n, false);
  const auto deadline = Clock::now() + config_.request_timeout;
  std::vector<zmq_pollitem_t> items(n);
  while (std::count(acked.begin(), acked.end(), true) < static_cast<long>(n)) {
    const auto now = Clock::now();
    for (size_t k = 0; k < n; ++k) {
      if (acked[k]) continue;
      if (Status refused = links_[k].monitor.Check(); !refused.ok()) {
        return refused.WithContext(Describe(k));
      }
      if (now >= deadline) {
        return TimeoutError(Describe(k) + " did not finish loading within " +
                            Ms(config_.request_timeout));
      }
      if (links_[k].liveness.IsDead(now)) {
        return DisconnectedError(Describe(k) + " did not answer the handshake: nothing received for " +
                                 Ms(config_.heartbeat * config_.liveness));
      }
      if (now - links_[k].last_heartbeat >= config_.heartbeat) {
        links_[k].last_heartbeat = now;
        LOCKSTEP_RETURN_IF_ERROR(SendTo(k, wire::MarshalMessage(wire::Heartbeat{0, "coordinator"})));
      }
    }
    for (size_t k = 0; k < n; ++k) items[k] = {links_[k].client.socket().handle(), 0, ZMQ_POLLIN, 0};
    const long wait = std::min<long>(config_.heartbeat.count(), 50);
    if (zmq_poll(items.data(), static_cast<int>(n), wait) < 0 && zmq_errno() == ETERM) {
      return DisconnectedError("coordinator: zmq context terminated during the handshake");
    }
    for (size_t k = 0; k < n; ++k) {
      if (!(items[k].revents & ZMQ_POLLIN)) continue;
      Result<wire::Incoming> in = links_[k].client.Receive(milliseconds(0));
      if (!in.ok()) continue;
      links_[k].liveness.OnReceived(Clock::now());
      Result<wire::Message> m = wire::ParseMessage(in->bytes());
      if (!m.ok()) return m.status().WithContext("handshake with " + Describe(k));
      const auto* hb = std::get_if<wire::Heartbeat>(&*m);
      if (k == 0 && !claimed && hb != nullptr && hb->sequence == kClaimProbe) {
        claimed = true;
        for (size_t j = 1; j < n; ++j) {
          LOCKSTEP_RETURN_IF_ERROR(SendTo(j, wire::MarshalMessage(MakeAssign(j))));
        }
      }
      bool done = false;
      LOCKSTEP_RETURN_IF_ERROR(OnHandshakeMessage(k, *m, &done, &workers_[k]));
      if (done) acked[k] = true;
    }
  }
  return Status::Ok();
}

Status Coordinator::OnHandshakeMessage(size_t k, const wire::Message& m, bool* acked,
                                       WorkerInfo* record) {
  const StageSpec& spec = workers_[k].spec;
  if (auto* hello = std::get_if<wire::Hello>(&m)) {
    LOCKSTEP_RETURN_IF_ERROR(CheckHello(k, *hello));
    links_[k].hello_seen = true;
    if (record != nullptr) record->hello = *hello;
  } else if (auto* err = std::get_if<wire::ErrorReport>(&m)) {
    return Status(err->kind, Describe(k) + " refused the assignment: " + err->message);
  } else if (auto* ack = std::get_if<wire::AssignAck>(&m)) {
    if (!links_[k].hello_seen) {
      return InvalidError(Describe(k) + " acknowledged without a Hello");
    }
    if (ack->worker_index != k || ack->layer_lo != static_cast<uint32_t>(spec.lo) ||
        ack->layer_hi != static_cast<uint32_t>(spec.hi)) {
      return InvalidError(Describe(k) + " acknowledged a different assignment");
    }
    if (record != nullptr) record->resident_bytes = ack->resident_bytes;
    *acked = true;
  }
  return Status::Ok();
}

Status Coordinator::CheckHello(size_t k, const wire::Hello& h) const {
  const std::string who = Describe(k);
  if (h.protocol_version != wire::kProtocolVersion) {
    return MismatchError(who + " refused: protocol version " +
                         std::to_string(h.protocol_version) + ", the coordinator speaks " +
                         std::to_string(wire::kProtocolVersion));
  }
  LOCKSTEP_RETURN_IF_ERROR(
      CompareDigest(who, "weights_sha256", h.weights_sha256, seed_.weights_sha256));
  LOCKSTEP_RETURN_IF_ERROR(CompareDigest(who, "config_sha256", h.config_sha256, seed_.config_sha256));
  LOCKSTEP_RETURN_IF_ERROR(
      CompareDigest(who, "tokenizer_sha256", h.tokenizer_sha256, seed_.tokenizer_sha256));
  LOCKSTEP_RETURN_IF_ERROR(CompareDigest(who, "table_digest", h.table_digest, seed_.table_digest));
  return CompareDigest(who, "inv_freq_table_digest", h.inv_freq_table_digest,
                       seed_.inv_freq_table_digest);
}

// ---- sessions (any thread) ----------------------------------------------------

std::future<Coordinator::ReplyResult> Coordinator::Request(uint64_t session, uint32_t step,
                                                            wire::Frame frame, uint32_t relay) {
  auto promise = std::make_shared<std::promise<ReplyResult>>();
  std::future<ReplyResult> future = promise->get_future();
  inbox_.Push(
      Command{Command::Kind::kRequest, session, step, false, std::move(frame), promise, relay});
  return future;
}

std::future<Coordinator::ReplyResult> Coordinator::Expect(uint64_t session, uint32_t step) {
  auto promise = std::make_shared<std::promise<ReplyResult>>();
  std::future<ReplyResult> future = promise->get_future();
  inbox_.Push(Command{Command::Kind::kExpect, session, step, false, {}, promise});
  return future;
}

void Coordinator::Post(uint64_t session, wire::Frame frame, bool release) {
  inbox_.Push(Command{Command::Kind::kPost, session, 0, release, std::move(frame), nullptr});
}

void Coordinator::ShutdownWorkers(const std::string& reason) {
  inbox_.Push(Command{Command::Kind::kShutdownWorkers, 0, 0, false,
                      wire::MarshalMessage(wire::Shutdown{reason}), nullptr});
}

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
    const auto& w = model_.config.layer_window;
    if (std::any_of(w.begin(), w.end(), [](int x) { return x != 0; })) {
      open.window.kind = wire::WindowSpec::Kind::kPerLayer;
      open.window.per_layer.assign(static_cast<size_t>(model_.config.num_layers), 0);
      for (size_t l = 0; l < w.size() && l < open.window.per_layer.size(); ++l) {
        open.window.per_layer[l] = static_cast<uint32_t>(w[l]);
      }
    }
  }
  const uint64_t epoch = epoch_.load();
  Post(open.session_id, wire::MarshalMessage(open), false);
  return std::make_unique<RemoteSession>(*this, open, 0, sampling, epoch);
}

// ---- I/O thread -----------------------------------------------------------------

milliseconds Coordinator::NextWake(Clock::time_point now) const {
  Clock::time_point next = now + kMaxPoll;
  for (const Link& l : links_) {
    next = std::min(next, l.last_heartbeat + config_.heartbeat);
    if (l.liveness.DeathTime() > now) next = std::min(next, l.liveness.DeathTime());
  }
  for (const auto& [id, p] : pending_) next = std::min(next, p.deadline);
  if (recovery_) next = std::min(next, recovery_->deadline);
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(next - now));
}

// ---- who runs the loop ------------------------------------------------------------

void Coordinator::IoMain() {
  for (;;) {
    TakeLoopForIoThread();
    for (;;) {
      if (stopped_ || !Turn(NextWake(Clock::now()))) {
        std::lock_guard<std::mutex> lock(drive_mu_);
        driver_ = Driver::kNone;
        return;
      }
      if (Outstanding()) continue;
      // Nothing to see through: the next session thread to wait for a
      // reply may run the loop itself. Decided under drive_mu_, so a
      // session thread either finds the loop free or is counted waiting.
      std::lock_guard<std::mutex> lock(drive_mu_);
      if (waiting_ > 0) continue;
      driver_ = Driver::kNone;
      released_at_ = Clock::now();
      break;
    }
  }
}

void Coordinator::TakeLoopForIoThread() {
  std::unique_lock<std::mutex> lock(drive_mu_);
  for (;;) {
    const auto now = Clock::now();
    if (driver_ == Driver::kNone &&
        (hand_back_now_ || stop_requested_ || now >= released_at_ + kHandBack)) {
      break;
    }
    // While a session thread runs the loop, look again every kHandBack:
    // it lets go without a wake-up unless others need the loop at once.
    drive_cv_.wait_until(lock, (driver_ == Driver::kNone ? released_at_ : now) + kHandBack);
  }
  driver_ = Driver::kIoThread;
  hand_back_now_ = false;
}

bool Coordinator::Outstanding() const {
  return !pending_.empty() || recovery_.has_value() || !deferred_.empty();
}

Coordinator::ReplyResult Coordinator::Await(std::future<ReplyResult> reply, uint64_t session,
                                            uint32_t step) {
  const auto until = Clock::now() + wait_bound();
  bool drive = false;
  {
    std::lock_guard<std::mutex> lock(drive_mu_);
    drive = driver_ == Driver::kNone && !stop_requested_;
    if (drive) driver_ = Driver::kSession;
    else ++waiting_;
  }
  if (drive) {
    while (!stopped_ && reply.wait_for(milliseconds(0)) != std::future_status::ready) {
      const auto now = Clock::now();
      if (now >= until) break;
      const auto left = std::chrono::ceil<milliseconds>(until - now);
      (void)Turn(std::min(NextWake(now), left), &reply);
    }
    bool wake = false;
    {
      std::lock_guard<std::mutex> lock(drive_mu_);
      driver_ = Driver::kNone;
      released_at_ = Clock::now();
      hand_back_now_ = wake = Outstanding() || waiting_ > 0 || stopped_;
    }
    if (wake) drive_cv_.notify_all();
  } else {
    (void)reply.wait_until(until);
    std::lock_guard<std::mutex> lock(drive_mu_);
    --waiting_;
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
bool Ready(const std::future<Coordinator::ReplyResult>* f) {
  return f != nullptr && f->wait_for(milliseconds(0)) == std::future_status::ready;
}
}  // namespace

bool Coordinator::Turn(milliseconds wait, const std::future<ReplyResult>* awaited) {
  const size_t n = links_.size();
  items_.resize(n + 1);
  for (size_t k = 0; k < n; ++k) items_[k] = {links_[k].client.socket().handle(), 0, ZMQ_POLLIN, 0};
  items_[n] = {nullptr, inbox_.fd(), ZMQ_POLLIN, 0};
  const int rc = zmq_poll(items_.data(), static_cast<int>(n + 1), wait.count());
  if (rc < 0 && zmq_errno() == ETERM) {
    FailAll(DisconnectedError("coordinator: zmq context terminated"));
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
      FailAll(st);
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

Status Coordinator::Admissible(uint64_t session) {
  Status st = health();
  if (st.ok() && recovery_) {
    st = DisconnectedError(Describe(recovery_->stage) + " is being rebuilt on a spare");
  }
  if (auto it = sticky_.find(session); st.ok() && it != sticky_.end()) {
    st = it->second;
    sticky_.erase(it);
  }
  return st;
}

void Coordinator::OnCommand(Command& c) {
  switch (c.kind) {
    case Command::Kind::kRequest: {
      Status st = Admissible(c.session);
      timeline::Mark(timeline::Event::kCoordinatorSend, 0, c.session, c.step);
      if (st.ok()) st = SendTo(0, c.frame);
      if (!st.ok()) return c.promise->set_value(st);
      pending_[c.session] = Pending{c.step, Clock::now() + config_.request_timeout, c.promise};
      if (c.relay > 0) {
        relays_[c.session] = Relay{c.step + 1, c.step + c.relay, {}};
      } else {
        relays_.erase(c.session);
      }
      return;
    }
    case Command::Kind::kExpect:
      return OnExpect(c);
    case Command::Kind::kPost:
      if (c.release) {
        sticky_.erase(c.session);
        relays_.erase(c.session);
      }
      if (recovery_) {
        deferred_.push_back(std::move(c.frame));  // sent once the pipeline is whole
      } else if (health().ok()) {
        (void)SendTo(0, c.frame);
      }
      return;
    case Command::Kind::kShutdownWorkers:
      shutting_down_ = true;  // workers that exit now are not rebuilt on spares
      for (size_t k = 0; k < links_.size(); ++k) (void)SendTo(k, c.frame);
      return;
    case Command::Kind::kStop:
      return;
  }
}

void Coordinator::OnExpect(Command& c) {
  auto relay = relays_.find(c.session);
  if (relay == relays_.end() || c.step < relay->second.next || c.step > relay->second.last) {
    return c.promise->set_value(InvalidError(
        "session " + std::to_string(c.session) + " step " + std::to_string(c.step) +
        ": no request asked for it to be relayed"));
  }
  std::deque<wire::StepResult>& early = relay->second.early;
  if (!early.empty() && early.front().step == c.step) {
    wire::StepResult result = std::move(early.front());
    early.pop_front();
    RelayTaken(c.session, c.step);
    return c.promise->set_value(StepReply(std::move(result)));
  }
  // A relayed step's own error came before this expectation: it is sticky.
  if (Status st = Admissible(c.session); !st.ok()) return c.promise->set_value(st);
  pending_[c.session] = Pending{c.step, Clock::now() + config_.request_timeout, c.promise};
}

bool Coordinator::KeepRelayed(wire::StepResult& result) {
  auto it = relays_.find(result.session_id);
  if (it == relays_.end()) return false;
  Relay& r = it->second;
  const uint32_t expected = r.early.empty() ? r.next : r.early.back().step + 1;
  if (result.step != expected || result.step > r.last) return false;
  r.early.push_back(std::move(result));
  return true;
}

void Coordinator::RelayTaken(uint64_t session, uint32_t step) {
  auto it = relays_.find(session);
  if (it == relays_.end() || step < it->second.next) return;
  it->second.next = step + 1;
  if (it->second.next > it->second.last) relays_.erase(it);
}

void Coordinator::ReceiveFrom(size_t k, const std::future<ReplyResult>* awaited) {
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

void Coordinator::OnMessage(size_t k, const wire::Incoming& in) {
  const uint64_t received = timeline::NowIfEnabled();
  Result<wire::Message> parsed = wire::ParseMessage(in.bytes());
  if (!parsed.ok()) {
    const Status st = parsed.status().WithContext("frame from " + Describe(k));
    if (std::optional<uint64_t> session = wire::SessionOfRefusedFrame(in.bytes())) {
      return Resolve(*session, st);
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
  if (recovery_ && OnRecoveryMessage(k, *parsed)) return;
  if (auto* logits = std::get_if<wire::Logits>(&*parsed)) {
    timeline::MarkAt(timeline::Event::kCoordinatorReceive, 0, logits->session_id, logits->step,
                     received);
    auto it = pending_.find(logits->session_id);
    if (it == pending_.end() || it->second.step != logits->step) return;  // stale
    return Resolve(logits->session_id, StepReply(std::move(*logits)));
  }
  if (auto* result = std::get_if<wire::StepResult>(&*parsed)) {
    timeline::MarkAt(timeline::Event::kCoordinatorReceive, 0, result->session_id, result->step,
                     received);
    auto it = pending_.find(result->session_id);
    if (it == pending_.end() || it->second.step != result->step) {
      (void)KeepRelayed(*result);  // a relayed step to come, or stale
      return;
    }
    RelayTaken(result->session_id, result->step);
    return Resolve(result->session_id, StepReply(std::move(*result)));
  }
  if (auto* err = std::get_if<wire::ErrorReport>(&*parsed)) {
    const Status st = err->ToStatus();
    if (!err->has_session) return FailAll(st);
    if (pending_.count(err->session_id)) return Resolve(err->session_id, st);
    sticky_.emplace(err->session_id, st);  // keeps the first error of a session
  }
}

void Coordinator::Resolve(uint64_t session, ReplyResult result) {
  auto it = pending_.find(session);
  if (it == pending_.end()) return;
  it->second.promise->set_value(std::move(result));
  pending_.erase(it);
}

void Coordinator::FailAll(const Status& st) {
  for (auto& [id, p] : pending_) p.promise->set_value(st);
  pending_.clear();
}

void Coordinator::Tick(Clock::time_point now) {
  const wire::Frame heartbeat = wire::MarshalMessage(wire::Heartbeat{0, "coordinator"});
  for (size_t k = 0; k < links_.size() && !dead_; ++k) {
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
  if (!dead_) CheckRecoveryDeadline(now);
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now < it->second.deadline) {
      ++it;
      continue;
    }
    it->second.promise->set_value(TimeoutError(
        "session " + std::to_string(it->first) + " step " + std::to_string(it->second.step) +
        ": no answer from the pipeline " + plan_text() + " within " +
        Ms(config_.request_timeout)));
    it = pending_.erase(it);
  }
}

}  // namespace lockstep
