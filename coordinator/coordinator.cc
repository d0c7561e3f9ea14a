#include "coordinator/coordinator.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <iostream>

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
constexpr milliseconds kMaxPoll{100};
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
    inbox_.Push(Command{Command::Kind::kStop, 0, 0, false, {}, nullptr});
    io_.join();
  }
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
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<StageSpec> specs, ResolvePlan(config, c->model_.config));
  for (size_t k = 0; k < specs.size(); ++k) {
    c->workers_.push_back(WorkerInfo{k, config.workers[k], specs[k], {}, 0});
  }
  LOCKSTEP_RETURN_IF_ERROR(c->Connect());
  LOCKSTEP_RETURN_IF_ERROR(c->Handshake(specs));
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

Status Coordinator::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

WireStats Coordinator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

// ---- handshake (caller's thread, before the I/O thread exists) --------------

Status Coordinator::Connect() {
  const wire::HeartbeatOptions hb{config_.heartbeat, config_.liveness};
  const std::string identity = wire::UnguessableIdentity("coordinator");
  for (size_t k = 0; k < workers_.size(); ++k) {
    wire::TransportOptions transport;
    transport.send_timeout = milliseconds(0);  // the I/O thread never blocks on a peer
    transport.security.insecure = config_.insecure;
    transport.security.own = config_.key;
    if (k < config_.worker_keys.size()) {
      transport.security.server_public_z85 = config_.worker_keys[k];
    }
    Result<wire::Client> client =
        wire::Client::Connect(context_, workers_[k].endpoint, identity, transport);
    if (!client.ok()) return client.status().WithContext(Describe(k));
    const auto now = Clock::now();
    links_.push_back(Link{std::move(client).value(), wire::PeerLiveness(hb, now), now});
  }
  return Status::Ok();
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

Status Coordinator::Handshake(const std::vector<StageSpec>& specs) {
  const size_t n = specs.size();
  for (size_t k = 0; k < n; ++k) {
    wire::Assign a;
    a.model_dir = config_.model_dir;
    a.expected_weights_sha256 = seed_.weights_sha256;
    a.expected_config_sha256 = seed_.config_sha256;
    a.expected_tokenizer_sha256 = seed_.tokenizer_sha256;
    a.layer_lo = static_cast<uint32_t>(specs[k].lo);
    a.layer_hi = static_cast<uint32_t>(specs[k].hi);
    a.is_first = specs[k].first;
    a.is_last = specs[k].last;
    a.next_hop = k + 1 < n ? workers_[k + 1].endpoint : "";
    a.worker_index = static_cast<uint32_t>(k);
    if (k + 1 < n && k + 1 < config_.worker_keys.size()) a.next_hop_key = config_.worker_keys[k + 1];
    if (k > 0 && k - 1 < config_.worker_keys.size()) a.upstream_key = config_.worker_keys[k - 1];
    LOCKSTEP_RETURN_IF_ERROR(SendTo(k, wire::MarshalMessage(a)));
  }
  std::vector<bool> acked(n, false);
  const auto deadline = Clock::now() + config_.request_timeout;
  std::vector<zmq_pollitem_t> items(n);
  while (std::count(acked.begin(), acked.end(), true) < static_cast<long>(n)) {
    const auto now = Clock::now();
    for (size_t k = 0; k < n; ++k) {
      if (acked[k]) continue;
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
      bool done = false;
      LOCKSTEP_RETURN_IF_ERROR(OnHandshakeMessage(k, *m, &done));
      if (done) acked[k] = true;
    }
  }
  return Status::Ok();
}

Status Coordinator::OnHandshakeMessage(size_t k, const wire::Message& m, bool* acked) {
  WorkerInfo& w = workers_[k];
  if (auto* hello = std::get_if<wire::Hello>(&m)) {
    LOCKSTEP_RETURN_IF_ERROR(CheckHello(k, *hello));
    w.hello = *hello;
  } else if (auto* err = std::get_if<wire::ErrorReport>(&m)) {
    return Status(err->kind, Describe(k) + " refused the assignment: " + err->message);
  } else if (auto* ack = std::get_if<wire::AssignAck>(&m)) {
    if (w.hello.worker_id.empty()) {
      return InvalidError(Describe(k) + " acknowledged without a Hello");
    }
    if (ack->worker_index != k || ack->layer_lo != static_cast<uint32_t>(w.spec.lo) ||
        ack->layer_hi != static_cast<uint32_t>(w.spec.hi)) {
      return InvalidError(Describe(k) + " acknowledged a different assignment");
    }
    w.resident_bytes = ack->resident_bytes;
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
                                                            wire::Frame frame) {
  auto promise = std::make_shared<std::promise<ReplyResult>>();
  std::future<ReplyResult> future = promise->get_future();
  inbox_.Push(Command{Command::Kind::kRequest, session, step, false, std::move(frame), promise});
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
                                                                const SamplingParams& sampling) {
  if (window && *window < 0) return InvalidError("--window must be >= 0");
  LOCKSTEP_RETURN_IF_ERROR(ValidateSamplingParams(sampling));
  LOCKSTEP_RETURN_IF_ERROR(health());
  wire::SessionOpen open;
  open.session_id = NewSessionId();
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
  Post(open.session_id, wire::MarshalMessage(open), false);
  return std::make_unique<RemoteSession>(*this, open.session_id, 0, sampling);
}

// ---- I/O thread -----------------------------------------------------------------

milliseconds Coordinator::NextWake(Clock::time_point now) const {
  Clock::time_point next = now + kMaxPoll;
  for (const Link& l : links_) {
    next = std::min(next, l.last_heartbeat + config_.heartbeat);
    if (l.liveness.DeathTime() > now) next = std::min(next, l.liveness.DeathTime());
  }
  for (const auto& [id, p] : pending_) next = std::min(next, p.deadline);
  return std::max(milliseconds(0), std::chrono::ceil<milliseconds>(next - now));
}

void Coordinator::IoMain() {
  std::vector<zmq_pollitem_t> items(links_.size() + 1);
  for (;;) {
    const size_t n = links_.size();
    for (size_t k = 0; k < n; ++k) items[k] = {links_[k].client.socket().handle(), 0, ZMQ_POLLIN, 0};
    items[n] = {nullptr, inbox_.fd(), ZMQ_POLLIN, 0};
    const int rc = zmq_poll(items.data(), static_cast<int>(n + 1), NextWake(Clock::now()).count());
    if (rc < 0 && zmq_errno() == ETERM) {
      FailAll(DisconnectedError("coordinator: zmq context terminated"));
      return;
    }
    for (size_t k = 0; k < n; ++k) {
      if (rc > 0 && (items[k].revents & ZMQ_POLLIN)) ReceiveFrom(k);
    }
    if (rc > 0 && (items[n].revents & ZMQ_POLLIN)) {
      for (Command& c : inbox_.Drain()) {
        if (c.kind == Command::Kind::kStop) {
          FailAll(DisconnectedError("coordinator stopped"));
          return;
        }
        OnCommand(c);
      }
    }
    Tick(Clock::now());
  }
}

void Coordinator::OnCommand(Command& c) {
  switch (c.kind) {
    case Command::Kind::kRequest: {
      Status st = health();
      if (auto it = sticky_.find(c.session); st.ok() && it != sticky_.end()) {
        st = it->second;
        sticky_.erase(it);
      }
      if (st.ok()) st = SendTo(0, c.frame);
      if (!st.ok()) return c.promise->set_value(st);
      pending_[c.session] = Pending{c.step, Clock::now() + config_.request_timeout, c.promise};
      return;
    }
    case Command::Kind::kPost:
      if (c.release) sticky_.erase(c.session);
      if (health().ok()) (void)SendTo(0, c.frame);
      return;
    case Command::Kind::kShutdownWorkers:
      for (size_t k = 0; k < links_.size(); ++k) (void)SendTo(k, c.frame);
      return;
    case Command::Kind::kStop:
      return;
  }
}

void Coordinator::ReceiveFrom(size_t k) {
  for (int i = 0; i < kMaxReceivesPerWake; ++i) {
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
  Result<wire::Message> parsed = wire::ParseMessage(in.bytes());
  if (!parsed.ok()) {
    const Status st = parsed.status().WithContext("frame from " + Describe(k));
    if (std::optional<uint64_t> session = wire::SessionOfRefusedFrame(in.bytes())) {
      return Resolve(*session, st);
    }
    std::cerr << "lockstep coordinator: " << st.ToString() << "\n";
    return;
  }
  if (auto* logits = std::get_if<wire::Logits>(&*parsed)) {
    auto it = pending_.find(logits->session_id);
    if (it == pending_.end() || it->second.step != logits->step) return;  // stale
    return Resolve(logits->session_id, StepReply(std::move(*logits)));
  }
  if (auto* result = std::get_if<wire::StepResult>(&*parsed)) {
    auto it = pending_.find(result->session_id);
    if (it == pending_.end() || it->second.step != result->step) return;  // stale
    return Resolve(result->session_id, StepReply(*result));
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
    if (l.liveness.IsDead(now) && health().ok()) {
      const Status dead = DisconnectedError(
          Describe(k) + " stopped answering: nothing received for " +
          Ms(config_.heartbeat * config_.liveness) + " (heartbeat " + Ms(config_.heartbeat) +
          " x liveness " + std::to_string(config_.liveness) + ")");
      {
        std::lock_guard<std::mutex> lock(mu_);
        broken_ = dead;
      }
      dead_ = true;
      FailAll(dead);
    }
  }
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
