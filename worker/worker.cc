#include "worker/worker.h"

#include <algorithm>
#include <iostream>
#include <unistd.h>

#include "base/step_timeline.h"
#include "engine/ops/fp_env.h"
#include "worker/admission.h"

namespace lockstep {
namespace {

using std::chrono::milliseconds;
constexpr milliseconds kPollInterval{50};  // bounds how long Stop() takes
constexpr int kMaxReceivesPerWake = 64;
// A send may block the I/O thread this long at most (a full queue), so
// heartbeats are never starved for a whole interval.
constexpr milliseconds kMaxSendBlock{100};
// An inline decode pass may hold heartbeats back as long as a blocked send.
static_assert(ComputeQueue::kMaxInlineStep == kMaxSendBlock);

}  // namespace

Result<std::unique_ptr<Worker>> Worker::Create(zmq::context_t& context, WorkerOptions options) {
  options.transport.send_timeout = std::min(options.transport.send_timeout, kMaxSendBlock);
  LOCKSTEP_ASSIGN_OR_RETURN(wire::Server server,
                            wire::Server::Bind(context, options.listen, options.transport));
  if (options.name.empty()) options.name = "worker@" + server.endpoint();
  LOCKSTEP_RETURN_IF_ERROR(ValidateComputeOptions(options.compute));
  options.next_hop_transport.send_timeout =
      std::min(options.next_hop_transport.send_timeout, kMaxSendBlock);
  options.transport.max_message_bytes = options.limits.frame_bytes;
  options.next_hop_transport.max_message_bytes = options.limits.frame_bytes;
  options.next_hop_transport.security = options.transport.security;
  options.next_hop_transport.security.allowed_clients_z85.clear();
  return std::unique_ptr<Worker>(new Worker(context, std::move(options), std::move(server)));
}

Worker::Worker(zmq::context_t& context, WorkerOptions options, wire::Server server)
    : options_(std::move(options)),
      server_(std::move(server)),
      endpoint_(server_.endpoint()),
      links_(context, options_.next_hop_transport, options_.name,
             options_.transport.security.insecure),
      policy_(options_.orphan_after),
      queue_([this](const wire::Message& m) { return host_->IsDecodeStep(m); },
             options_.max_batch, options_.batch_window_for_testing) {}

Worker::~Worker() {
  if (compute_.joinable()) {
    queue_.Stop();
    compute_.join();
  }
}

std::unique_ptr<StageHost> Worker::MakeHost() {
  auto host = std::make_unique<StageHost>(options_.name, options_.compute);
  host->set_frame_pool(&frames_);
  host->set_model_dir_override(options_.model_dir_override);
  if (options_.observe_hidden_for_testing) {
    host->set_observe_hidden_for_testing(options_.observe_hidden_for_testing);
  }
  host->set_max_batch(options_.max_batch);
  host->set_kv_budget(options_.limits.kv_bytes_per_worker);
  host->set_weight_budget(options_.limits.weight_bytes_per_worker);
  return host;
}

void Worker::Log(const std::string& line) const {
  std::cerr << "lockstep worker " << options_.name << ": " << line << "\n";
}

Status Worker::Run() {
  if (!queue_.ok() || !outbox_.ok()) return IoError("eventfd failed: " + options_.name);
  // §1.3: this thread runs decode steps too (inline, see worker.h).
  if (Status pin = ops::PinFpEnvironment(); !pin.ok()) {
    return pin.WithContext("refusing to serve (" + options_.name + ")");
  }
  host_ = MakeHost();
  std::promise<Status> pinned;
  std::future<Status> pin_result = pinned.get_future();
  compute_ = std::thread([this, &pinned] { ComputeMain(&pinned); });
  Status pin = pin_result.get();
  if (!pin.ok()) {
    compute_.join();
    return pin.WithContext("refusing to serve (" + options_.name + ")");
  }
  ServeLoop();
  queue_.Stop();
  compute_.join();
  return Status::Ok();
}

// ---- compute thread ---------------------------------------------------------

void Worker::ComputeMain(std::promise<Status>* pinned) {
  const Status pin = ops::PinFpEnvironment();  // §1.3, this thread computes
  pinned->set_value(pin);
  if (!pin.ok()) return;
  StageRunner runner = MakeRunner(/*inline_io=*/false);
  std::vector<Work> works;
  works.reserve(host_->max_batch() + 1);
  for (;;) {
    if (!queue_.Take(milliseconds(500), &works)) continue;
    if (!runner.Run(works)) return;
    queue_.Done(works.size());  // at 0 the I/O thread may use the host (RunInline)
  }
}

StageRunner Worker::MakeRunner(bool inline_io) {
  return StageRunner(
      *host_, queue_, {options_.load_delay_for_testing, options_.step_delay_for_testing},
      [this, inline_io](std::vector<Outgoing>* out) { Publish(out, inline_io); },
      [this](const std::string& line) { Log(line); });
}

void Worker::Publish(std::vector<Outgoing>* out, bool inline_io) {
  session_count_.store(host_->session_count());
  batched_steps_.store(host_->batched_steps());
  batched_rows_.store(host_->batched_rows());
  compute_nanos_.store(host_->compute_nanos());
  for (Outgoing& o : *out) {
    if (inline_io) {
      Deliver(o);
      frames_.Give(std::move(o.frame));
    } else {
      outbox_.Push(std::move(o));
    }
  }
}

// ---- I/O thread -------------------------------------------------------------

void Worker::ServeLoop() {
  StageRunner io = MakeRunner(/*inline_io=*/true);
  std::vector<Work> io_works;
  io_works.reserve(host_->max_batch());
  while (!stop_.load()) {
    zmq_pollitem_t items[4] = {
        {server_.socket().handle(), 0, ZMQ_POLLIN, 0},
        {nullptr, outbox_.fd(), ZMQ_POLLIN, 0},
    };
    // The links this worker opened (next stage, first stage) follow.
    wire::Client* links[2] = {};
    const int count = 2 + static_cast<int>(links_.Open(links));
    for (int i = 2; i < count; ++i) items[i] = {links[i - 2]->socket().handle(), -1, ZMQ_POLLIN, 0};
    // A step of its own (one stage relaying to itself) runs without waiting.
    const long wait = queue_.held() == 0 ? static_cast<long>(kPollInterval.count()) : 0;
    if (zmq_poll(items, count, wait) < 0) {
      if (zmq_errno() == ETERM) return;
      continue;  // EINTR
    }
    if (items[0].revents & ZMQ_POLLIN) {
      for (int i = 0; i < kMaxReceivesPerWake && !stop_.load(); ++i) {
        Result<wire::Incoming> in = server_.Receive(milliseconds(0));
        if (!in.ok()) {
          if (in.status().kind() != ErrorKind::kTimeout) Log(in.status().ToString());
          break;
        }
        OnIncoming(*in);
      }
    }
    RunInline(io, &io_works);
    if (items[1].revents & ZMQ_POLLIN) DeliverComputed();
    // The next and the first stage never talk back on these links: drop.
    for (int i = 2; i < count; ++i) {
      if (items[i].revents & ZMQ_POLLIN) (void)links[i - 2]->Receive(milliseconds(0));
    }
    CheckCoordinator();
  }
}

void Worker::DeliverComputed() {
  for (Outgoing& o : outbox_.Drain()) {
    Deliver(o);
    frames_.Give(std::move(o.frame));  // back to the next step's marshal
  }
}

void Worker::RunInline(StageRunner& io, std::vector<Work>* works) {
  if (queue_.held() == 0) return;
  // What the compute thread finished before goes out first (a session's
  // SessionOpen before its first step).
  DeliverComputed();
  queue_.TakeHeld(works);
  (void)io.Run(*works);  // decode steps only: never a kStop
  works->clear();
}

// Paranoid Pirate from the worker's side: a silent coordinator is dead and
// its sessions would otherwise be held forever.
void Worker::CheckCoordinator() {
  if (!policy_.TakeOrphaned(std::chrono::steady_clock::now())) return;
  open_sessions_.clear();
  queue_.Enqueue(Work{Work::Kind::kDropSessions, {}, 0, {}});
}

Status Worker::AdmitAssign(const wire::Incoming& in, const wire::Assign& a) {
  // Whoever may not hold the worker learns that, and nothing about the rest.
  const PeerId peer{in.peer, in.peer_key};
  const auto now = std::chrono::steady_clock::now();
  const bool connected = policy_.MustProbeHolder(peer, now) && HolderConnected();
  LOCKSTEP_RETURN_IF_ERROR(policy_.AdmitAssign(peer, connected, now));
  return admission::CheckAssign(a, endpoint_, options_.transport.security.insecure);
}

bool Worker::HolderConnected() {
  // ROUTER_MANDATORY: a frame to a connection that closed is refused at
  // once (Disconnected); a full queue (Timeout) is a live holder too.
  const wire::Heartbeat probe{0, options_.name, compute_nanos_.load(), links_.bytes_to_next()};
  return server_.Send(policy_.holder_id(), wire::MarshalMessage(probe)).kind() !=
         ErrorKind::kDisconnected;
}

Status Worker::Admit(const wire::Incoming& in, PeerRole role, const wire::Message& m) {
  if (auto* a = std::get_if<wire::Assign>(&m)) return AdmitAssign(in, *a);
  LOCKSTEP_RETURN_IF_ERROR(policy_.Admit(PeerId{in.peer, in.peer_key}, role, m));
  bool has = false;
  const uint64_t id = StageHost::SessionOf(m, &has);
  return admission::CheckLimits(m, options_.limits, open_sessions_.size(),
                                has && open_sessions_.count(id) > 0);
}

void Worker::ReplyError(const std::string& peer, const Status& st, std::optional<uint64_t> session) {
  Log(st.ToString());
  const wire::ErrorReport r = wire::ErrorReport::From(st, options_.name, session);
  (void)server_.Send(peer, wire::MarshalMessage(r));
}

void Worker::OnIncoming(const wire::Incoming& in) {
  const uint64_t received = timeline::NowIfEnabled();
  const PeerId peer{in.peer, in.peer_key};
  // Only a role already established: a keyless peer binds to one by what it sends.
  const PeerRole known = policy_.RoleOf(peer, nullptr);
  if (known == PeerRole::kHolder) policy_.Heard(std::chrono::steady_clock::now());
  Result<wire::Message> parsed = wire::ParseMessage(in.bytes());
  if (!parsed.ok()) return OnUnparsable(in, known, parsed.status());
  wire::Message& m = *parsed;
  if (auto* hb = std::get_if<wire::Heartbeat>(&m)) {
    const wire::Heartbeat reply{hb->sequence, options_.name, compute_nanos_.load(),
                                links_.bytes_to_next()};
    (void)server_.Send(in.peer, wire::MarshalMessage(reply));
    return;
  }
  std::optional<uint64_t> session;
  bool has = false;
  if (const uint64_t id = StageHost::SessionOf(m, &has); has) session = id;
  const PeerRole role = policy_.RoleOf(peer, &m);
  if (Status admitted = Admit(in, role, m); !admitted.ok()) {
    // The refused peer alone hears of it; a frame forwarded by the upstream
    // stage (known as such) belongs to the holder's session, so the holder
    // hears instead.
    if (role == known && (role == PeerRole::kUpstream || role == PeerRole::kRing)) {
      return ReportToCoordinator(admitted, session);
    }
    return ReplyError(in.peer, admitted, session);
  }
  policy_.Admitted(peer, role);
  if (std::holds_alternative<wire::Shutdown>(m)) {
    Log("shutdown requested by the coordinator: " + std::get<wire::Shutdown>(m).reason);
    stop_.store(true);
    return;
  }
  if (auto* a = std::get_if<wire::Assign>(&m)) TakeAssign(in, *a);
  if (session && timeline::Enabled()) {
    const uint32_t step = StageHost::StepOf(m);
    timeline::MarkAt(timeline::Event::kWorkerReceive, stage_index_, *session, step, received);
    timeline::Mark(timeline::Event::kWorkerAdmitted, stage_index_, *session, step);
  }
  if (std::holds_alternative<wire::SessionOpen>(m) || std::holds_alternative<wire::Fork>(m)) {
    open_sessions_.insert(*session);
  } else if (std::holds_alternative<wire::Release>(m)) {
    open_sessions_.erase(*session);  // an unknown one changes nothing
  }
  queue_.Submit(Work{Work::Kind::kMessage, std::move(m), 0, {}});
}

void Worker::TakeAssign(const wire::Incoming& in, const wire::Assign& a) {
  if (policy_.Assigned(PeerId{in.peer, in.peer_key}, a, std::chrono::steady_clock::now())) {
    Log("assigned by another coordinator: the previous one is gone; dropping its sessions");
    queue_.Enqueue(Work{Work::Kind::kDropSessions, {}, 0, {}});
    open_sessions_.clear();
  }
  links_.Reset(a.next_hop_key, a.ring_hop_key);  // a new next hop and ring hop
  stage_index_ = a.worker_index;
  for (const std::string* key : {&a.upstream_key, &a.ring_upstream_key}) {
    if (key->empty() || options_.transport.security.insecure) continue;
    const Status allowed = server_.AllowClient(*key);
    if (!allowed.ok()) Log("cannot accept the upstream or last stage: " + allowed.ToString());
  }
}

// A frame that failed to decode (a flipped bit fails the digest check):
// from the holder or its upstream stage, fail its session when the envelope
// still names one; from anyone else, tell that peer only.
void Worker::OnUnparsable(const wire::Incoming& in, PeerRole role, const Status& st) {
  const Status named = st.WithContext("frame from peer '" + in.peer + "'");
  if (role == PeerRole::kStranger) return ReplyError(in.peer, named, std::nullopt);
  if (std::optional<uint64_t> session = wire::SessionOfRefusedFrame(in.bytes())) {
    queue_.Enqueue(Work{Work::Kind::kFail, {}, *session, named});
    return;
  }
  ReportToCoordinator(named, std::nullopt);
}

void Worker::ReportToCoordinator(const Status& st, std::optional<uint64_t> session) {
  Log(st.ToString());
  if (!policy_.held()) return;
  const wire::ErrorReport r = wire::ErrorReport::From(st, options_.name, session);
  const Status sent = server_.Send(policy_.holder_id(), wire::MarshalMessage(r));
  if (!sent.ok()) Log("cannot report to the coordinator: " + sent.ToString());
}

Status Worker::SendRelayed(Outgoing& o) {
  if (stage_index_ == 0) {  // first and last: the session's next step is this worker's
    Result<wire::Message> m = wire::ParseMessage(o.frame);
    if (!m.ok()) return m.status().WithContext("relaying a step to this stage itself");
    queue_.Submit(Work{Work::Kind::kMessage, std::move(m).value(), 0, {}});
    return Status::Ok();
  }
  return links_.SendRing(o.frame);
}

void Worker::Deliver(Outgoing& o) {
  if (o.has_session) {
    timeline::Mark(o.to == Outgoing::To::kFirstStage ? timeline::Event::kWorkerRelay
                                                     : timeline::Event::kWorkerSend,
                   stage_index_, o.session_id, o.step);
  }
  Status st;
  switch (o.to) {
    case Outgoing::To::kConnectNext:  // checked now, connected at the first frame
      st = links_.SetNext(o.endpoint, o.label);
      if (st.ok()) return;
      break;
    case Outgoing::To::kConnectRing:
      st = links_.SetRing(o.endpoint);
      if (st.ok()) return;
      break;
    case Outgoing::To::kFirstStage:
      st = SendRelayed(o);
      break;
    case Outgoing::To::kNextStage:
      st = links_.SendNext(o.frame);
      if (st.ok()) timeline::Mark(timeline::Event::kWorkerSent, stage_index_, o.session_id, o.step);
      break;
    case Outgoing::To::kCoordinator:
      if (!policy_.held()) return;
      st = server_.Send(policy_.holder_id(), o.frame);
      if (!st.ok()) {
        Log("cannot reach the coordinator: " + st.ToString());
        return;
      }
      if (o.has_session) {
        timeline::Mark(timeline::Event::kWorkerSent, stage_index_, o.session_id, o.step);
      }
      break;
  }
  if (!st.ok()) {
    ReportToCoordinator(st, o.has_session ? std::optional<uint64_t>(o.session_id) : std::nullopt);
  }
}

}  // namespace lockstep
