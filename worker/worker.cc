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
constexpr std::chrono::nanoseconds kMaxInlineStep = kMaxSendBlock;

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
    : context_(context),
      options_(std::move(options)),
      server_(std::move(server)),
      endpoint_(server_.endpoint()),
      policy_(options_.orphan_after) {}

Worker::~Worker() {
  if (compute_.joinable()) {
    inbox_.Push(Work{Work::Kind::kStop, {}, 0, {}});
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
  if (!inbox_.ok() || !outbox_.ok()) return IoError("eventfd failed: " + options_.name);
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
  inbox_.Push(Work{Work::Kind::kStop, {}, 0, {}});
  compute_.join();
  return Status::Ok();
}

// ---- compute thread ---------------------------------------------------------

void Worker::ComputeMain(std::promise<Status>* pinned) {
  const Status pin = ops::PinFpEnvironment();  // §1.3, this thread computes
  pinned->set_value(pin);
  if (!pin.ok()) return;
  StageHost& host = *host_;
  Compute c = MakeCompute(/*inline_io=*/false);
  for (;;) {
    std::optional<Work> first = inbox_.PopWait(milliseconds(500));
    if (!first) continue;
    Gather(std::move(*first), host, &c.works);
    if (timeline::Enabled()) MarkComputeStart(c);
    // In arrival order; only a run of decode steps of distinct sessions is
    // merged, so no two messages of one session change order and a pending
    // batch is always applied before anything else.
    for (Work& work : c.works) {
      if (!Apply(c, work)) return;
    }
    FlushBatch(c);
    // Released: the I/O thread that reads 0 may use the host (RunInline).
    queued_.fetch_sub(c.works.size(), std::memory_order_release);
  }
}

Worker::Compute Worker::MakeCompute(bool inline_io) {
  Compute c{*host_, {}, {}, {}, inline_io};
  c.works.reserve(host_->max_batch() + 1);
  c.batch.reserve(host_->max_batch());
  return c;
}

void Worker::MarkComputeStart(const Compute& c) const {
  for (const Work& w : c.works) {
    bool has = false;
    const uint64_t session = StageHost::SessionOf(w.message, &has);
    if (w.kind == Work::Kind::kMessage && has) {
      timeline::Record(timeline::Event::kComputeStart, c.host.stage_index(), session,
                       StageHost::StepOf(w.message));
    }
  }
}

bool Worker::Apply(Compute& c, Work& work) {
  StageHost& host = c.host;
  if (work.kind == Work::Kind::kMessage && host.IsDecodeStep(work.message)) {
    bool has = false;
    const uint64_t session = StageHost::SessionOf(work.message, &has);
    const bool repeat = std::any_of(c.batch.begin(), c.batch.end(), [&](const wire::Message* m) {
      return StageHost::SessionOf(*m, &has) == session;
    });
    if (repeat || c.batch.size() >= host.max_batch()) FlushBatch(c);
    c.batch.push_back(&work.message);
    return true;
  }
  FlushBatch(c);
  switch (work.kind) {
    case Work::Kind::kStop:
      if (host.batched_steps() > 0) {
        Log("ran " + std::to_string(host.batched_steps()) + " batched decode pass(es) over " +
            std::to_string(host.batched_rows()) + " rows");
      }
      return false;
    case Work::Kind::kFail:
      host.FailSession(work.session_id, work.failure, &c.out);
      break;
    case Work::Kind::kDropSessions:
      Log("the coordinator is gone; dropping " + std::to_string(host.session_count()) +
          " session(s)");
      host.DropSessions();
      break;
    case Work::Kind::kMessage:
      if (options_.load_delay_for_testing.count() > 0 &&
          std::holds_alternative<wire::Assign>(work.message)) {
        std::this_thread::sleep_for(options_.load_delay_for_testing);
      }
      host.Handle(work.message, &c.out);
      break;
  }
  Publish(c);
  return true;
}

void Worker::FlushBatch(Compute& c) {
  if (c.batch.empty()) return;
  const auto start = std::chrono::steady_clock::now();
  if (options_.step_delay_for_testing.count() > 0) {
    std::this_thread::sleep_for(options_.step_delay_for_testing);
  }
  c.host.HandleDecodeBatch(c.batch, &c.out);
  last_pass_nanos_.store((std::chrono::steady_clock::now() - start).count(),
                         std::memory_order_relaxed);
  c.batch.clear();
  Publish(c);
}

void Worker::Publish(Compute& c) {
  session_count_.store(c.host.session_count());
  batched_steps_.store(c.host.batched_steps());
  batched_rows_.store(c.host.batched_rows());
  compute_nanos_.store(c.host.compute_nanos());
  for (Outgoing& o : c.out) {
    if (c.inline_io) {
      Deliver(o);
      frames_.Give(std::move(o.frame));
    } else {
      outbox_.Push(std::move(o));
    }
  }
  c.out.clear();
}

void Worker::Gather(Work first, const StageHost& host, std::vector<Work>* works) {
  works->clear();
  const bool decode = first.kind == Work::Kind::kMessage && host.IsDecodeStep(first.message);
  works->push_back(std::move(first));
  if (!decode || host.max_batch() <= 1) return;
  const auto deadline = std::chrono::steady_clock::now() + options_.batch_window_for_testing;
  size_t steps = 1;
  while (steps < host.max_batch()) {
    const auto left = std::chrono::duration_cast<milliseconds>(
        deadline - std::chrono::steady_clock::now());
    std::optional<Work> next = inbox_.PopWait(std::max(left, milliseconds(0)));
    if (!next) return;
    const bool more =
        next->kind == Work::Kind::kMessage && host.IsDecodeStep(next->message);
    works->push_back(std::move(*next));
    if (!more) return;  // applied after the batch, in order
    ++steps;
  }
}

// ---- I/O thread -------------------------------------------------------------

void Worker::ServeLoop() {
  Compute io = MakeCompute(/*inline_io=*/true);
  inline_.reserve(host_->max_batch());
  while (!stop_.load()) {
    zmq_pollitem_t items[4] = {
        {server_.socket().handle(), 0, ZMQ_POLLIN, 0},
        {nullptr, outbox_.fd(), ZMQ_POLLIN, 0},
    };
    // The links this worker opened (next stage, first stage) follow.
    wire::Client* links[4] = {};
    int count = 2;
    for (std::optional<wire::Client>* link : {&next_, &ring_}) {
      if (!*link) continue;
      links[count] = &**link;
      items[count++] = {(*link)->socket().handle(), -1, ZMQ_POLLIN, 0};
    }
    // A step of its own (one stage relaying to itself) runs without waiting.
    const long wait = inline_.empty() ? static_cast<long>(kPollInterval.count()) : 0;
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
    RunInline(io);
    if (items[1].revents & ZMQ_POLLIN) DeliverComputed();
    // The next and the first stage never talk back on these links: drop.
    for (int i = 2; i < count; ++i) {
      if (items[i].revents & ZMQ_POLLIN) (void)links[i]->Receive(milliseconds(0));
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

bool Worker::CanRunInline(const Work& work) const {
  return options_.batch_window_for_testing.count() == 0 &&
         last_pass_nanos_.load(std::memory_order_relaxed) <= kMaxInlineStep.count() &&
         queued_.load(std::memory_order_acquire) == 0 && work.kind == Work::Kind::kMessage &&
         inline_.size() < host_->max_batch() && host_->IsDecodeStep(work.message);
}

void Worker::Enqueue(Work work) {
  for (Work& w : inline_) {  // earlier arrivals go first
    queued_.fetch_add(1, std::memory_order_relaxed);
    inbox_.Push(std::move(w));
  }
  inline_.clear();
  queued_.fetch_add(1, std::memory_order_relaxed);
  inbox_.Push(std::move(work));
}

void Worker::RunInline(Compute& io) {
  if (inline_.empty()) return;
  // What the compute thread finished before goes out first (a session's
  // SessionOpen before its first step).
  DeliverComputed();
  io.works.swap(inline_);
  inline_.clear();
  if (timeline::Enabled()) MarkComputeStart(io);
  for (Work& work : io.works) (void)Apply(io, work);
  FlushBatch(io);
  io.works.clear();
}

// Paranoid Pirate from the worker's side: a silent coordinator is dead and
// its sessions would otherwise be held forever.
void Worker::CheckCoordinator() {
  if (!policy_.TakeOrphaned(std::chrono::steady_clock::now())) return;
  open_sessions_.clear();
  Enqueue(Work{Work::Kind::kDropSessions, {}, 0, {}});
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
  const wire::Heartbeat probe{0, options_.name, compute_nanos_.load(), bytes_to_next_};
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
                                bytes_to_next_};
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
  Work work{Work::Kind::kMessage, std::move(m), 0, {}};
  if (CanRunInline(work)) {
    inline_.push_back(std::move(work));  // run once this wake's frames are read
    return;
  }
  Enqueue(std::move(work));
}

void Worker::TakeAssign(const wire::Incoming& in, const wire::Assign& a) {
  if (policy_.Assigned(PeerId{in.peer, in.peer_key}, a, std::chrono::steady_clock::now())) {
    Log("assigned by another coordinator: the previous one is gone; dropping its sessions");
    Enqueue(Work{Work::Kind::kDropSessions, {}, 0, {}});
    open_sessions_.clear();
  }
  next_.reset();  // a new assignment gets a new next hop and ring hop
  next_endpoint_.clear();
  ring_.reset();
  ring_endpoint_.clear();
  stage_index_ = a.worker_index;
  next_key_ = a.next_hop_key;
  ring_key_ = a.ring_hop_key;
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
    Enqueue(Work{Work::Kind::kFail, {}, *session, named});
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

Status Worker::CheckLink(const std::string& endpoint, const std::string& key,
                         const std::string& what) const {
  return admission::CheckLink(endpoint, key, what, options_.transport.security.insecure);
}

Result<wire::Client> Worker::ConnectStage(const std::string& endpoint, const std::string& key,
                                          const std::string& what) const {
  wire::TransportOptions transport = options_.next_hop_transport;
  transport.security.server_public_z85 = key;
  return wire::Client::Connect(context_, endpoint,
                               wire::UnguessableIdentity(what + "-of-" + options_.name), transport);
}

Status Worker::SendRelayed(Outgoing& o) {
  if (stage_index_ == 0) {  // first and last: the session's next step is this worker's
    Result<wire::Message> m = wire::ParseMessage(o.frame);
    if (!m.ok()) return m.status().WithContext("relaying a step to this stage itself");
    Work work{Work::Kind::kMessage, std::move(m).value(), 0, {}};
    if (CanRunInline(work)) {
      inline_.push_back(std::move(work));
    } else {
      Enqueue(std::move(work));
    }
    return Status::Ok();
  }
  if (!ring_) {
    if (ring_endpoint_.empty()) {
      return InvalidError("a relayed step, but the assignment names no first stage to relay to");
    }
    Result<wire::Client> c = ConnectStage(ring_endpoint_, ring_key_, "ring");
    if (!c.ok()) return c.status().WithContext("connect to the first stage " + ring_endpoint_);
    ring_.emplace(std::move(c).value());
  }
  const Status st = ring_->Send(o.frame);
  if (st.ok()) return st;
  return DisconnectedError("cannot relay to the first stage at " + ring_endpoint_ + ": " +
                           st.message());
}

void Worker::Deliver(Outgoing& o) {
  if (o.has_session) {
    timeline::Mark(o.to == Outgoing::To::kFirstStage ? timeline::Event::kWorkerRelay
                                                     : timeline::Event::kWorkerSend,
                   stage_index_, o.session_id, o.step);
  }
  Status st;
  switch (o.to) {
    case Outgoing::To::kConnectNext:
      // Checked now, connected at the first frame: by then the coordinator
      // has every stage's AssignAck, so the next stage accepts our key.
      st = CheckLink(o.endpoint, next_key_, "next stage");
      if (!st.ok()) break;
      next_endpoint_ = o.endpoint;
      next_label_ = o.label + " at " + o.endpoint;
      return;
    case Outgoing::To::kConnectRing:
      st = CheckLink(o.endpoint, ring_key_, "first stage");
      if (!st.ok()) break;
      ring_endpoint_ = o.endpoint;
      return;
    case Outgoing::To::kFirstStage:
      st = SendRelayed(o);
      break;
    case Outgoing::To::kNextStage:
      if (!next_ && !next_endpoint_.empty()) {
        Result<wire::Client> c = ConnectStage(next_endpoint_, next_key_, "stage");
        if (!c.ok()) {
          st = c.status().WithContext("connect to next stage " + next_endpoint_);
          break;
        }
        next_.emplace(std::move(c).value());
      }
      st = next_ ? next_->Send(o.frame) : InternalError("no next stage connected");
      if (st.ok()) bytes_to_next_ += o.frame.size();
      if (st.ok()) timeline::Mark(timeline::Event::kWorkerSent, stage_index_, o.session_id, o.step);
      if (!st.ok()) {
        st = DisconnectedError("cannot send to the next stage (" + next_label_ + "): " +
                               st.message());
      }
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
