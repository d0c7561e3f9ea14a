// CoordinatorImpl (coordinator_impl.h): Start, the handshake that assigns
// every worker its stage, and what any thread may read.
#include <algorithm>
#include <bit>

#include "coordinator/assign_reply.h"
#include "coordinator/coordinator_impl.h"

namespace lockstep {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

}  // namespace

std::string CoordinatorImpl::Ms(milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

CoordinatorImpl::CoordinatorImpl(zmq::context_t& context, ClusterConfig config, ModelInfo model,
                                 RecoveryMachine recovery)
    : context_(context),
      config_(std::move(config)),
      model_(std::move(model)),
      seed_(model_.Seed()),
      recovery_(std::move(recovery)),
      baton_(kHandBack) {}

CoordinatorImpl::~CoordinatorImpl() {
  if (io_.joinable()) {
    baton_.Stop();
    inbox_.Push(Command{Command::Kind::kStop, 0, 0, false, {}, nullptr});
    io_.join();
  }
  for (Link& l : links_) l.monitor.Stop();
}

Result<std::unique_ptr<CoordinatorImpl>> CoordinatorImpl::Start(zmq::context_t& context,
                                                                const ClusterConfig& config,
                                                                ModelInfo model) {
  // The plan is checked before any worker is contacted, let alone loads.
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<StageSpec> specs, ResolvePlan(config, model));
  std::vector<RecoveryMachine::Stage> roster;
  for (size_t k = 0; k < specs.size(); ++k) {
    roster.push_back(RecoveryMachine::Stage{
        specs[k], config.workers[k], k < config.worker_keys.size() ? config.worker_keys[k] : ""});
  }
  RecoveryMachine recovery(std::move(roster), config.spares, model.Seed(), config.request_timeout);
  std::unique_ptr<CoordinatorImpl> c(
      new CoordinatorImpl(context, config, std::move(model), std::move(recovery)));
  if (!c->inbox_.ok()) return IoError("coordinator: eventfd failed");
  for (size_t k = 0; k < specs.size(); ++k) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::vector<FileDigest> files, StageWeightFiles(c->model_, specs[k]));
    std::vector<wire::WeightFile>& sent = c->weight_files_.emplace_back();
    for (const FileDigest& f : files) sent.push_back({f.file, f.sha256});
    c->workers_.push_back(WorkerInfo{k, config.workers[k], specs[k], {}, 0,
                                     c->recovery_.key(k)});
    c->stages_.push_back(StageState{config.workers[k], specs[k].lo, specs[k].hi, {}, {}});
  }
  LOCKSTEP_RETURN_IF_ERROR(c->Connect());
  LOCKSTEP_RETURN_IF_ERROR(c->Handshake(specs));
  // Disconnects while connecting and loading are the handshake's business.
  for (Link& l : c->links_) (void)l.monitor.TakeDisconnected();
  // Thread start is the happens-before edge handing the sockets over.
  c->io_ = std::thread([raw = c.get()] { raw->IoMain(); });
  return c;
}

std::string CoordinatorImpl::plan_text() const {
  std::vector<LayerRange> plan;
  for (const WorkerInfo& w : workers_) plan.push_back({w.spec.lo, w.spec.hi});
  return PlanText(plan);
}

milliseconds CoordinatorImpl::wait_bound() const {
  return config_.request_timeout + config_.heartbeat * config_.liveness + milliseconds(1000);
}

std::string CoordinatorImpl::Describe(size_t k) const { return recovery_.Describe(k); }

Status CoordinatorImpl::health() const {
  std::lock_guard<std::mutex> lock(mu_);
  return broken_;
}

WireStats CoordinatorImpl::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::vector<StageState> CoordinatorImpl::stages() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stages_;
}

std::vector<StageReport> CoordinatorImpl::stage_reports() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<StageReport> out = reports_;
  out.resize(workers_.size());
  return out;
}

// ---- handshake (caller's thread, before the I/O thread exists) --------------

Result<CoordinatorImpl::Link> CoordinatorImpl::MakeLink(const std::string& endpoint,
                                                const std::string& key) const {
  wire::TransportOptions transport;
  transport.send_timeout = milliseconds(0);  // the I/O thread never blocks on a peer
  transport.security.insecure = config_.insecure;
  transport.security.own = config_.key;
  transport.security.server_public_z85 = key;
  LOCKSTEP_ASSIGN_OR_RETURN(wire::Client client,
                            wire::Client::Connect(context_, endpoint, identity_, transport));
  LOCKSTEP_ASSIGN_OR_RETURN(LinkMonitor monitor,
                            LinkMonitor::Attach(context_, client.socket(), endpoint, key));
  const auto now = Clock::now();
  const wire::HeartbeatOptions hb{config_.heartbeat, config_.liveness};
  return Link{std::move(client), wire::PeerLiveness(hb, now), now, false, std::move(monitor), {}};
}

Status CoordinatorImpl::Connect() {
  identity_ = wire::UnguessableIdentity("coordinator");
  for (size_t k = 0; k < workers_.size(); ++k) {
    Result<Link> link = MakeLink(recovery_.endpoint(k), recovery_.key(k));
    if (!link.ok()) return link.status().WithContext(Describe(k));
    links_.push_back(std::move(link).value());
  }
  return Status::Ok();
}

wire::Assign CoordinatorImpl::MakeAssign(size_t k) const {
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
  a.next_hop = k + 1 < n ? recovery_.endpoint(k + 1) : "";
  a.worker_index = static_cast<uint32_t>(k);
  if (k + 1 < n) a.next_hop_key = recovery_.key(k + 1);
  if (k > 0) a.upstream_key = recovery_.key(k - 1);
  // The ring a relayed step takes back from the last stage to the first.
  if (n >= 2 && k + 1 == n) {
    a.ring_hop = recovery_.endpoint(0);
    a.ring_hop_key = recovery_.key(0);
  }
  if (n >= 2 && k == 0) a.ring_upstream_key = recovery_.key(n - 1);
  a.weight_files = weight_files_[k];
  return a;
}

Status CoordinatorImpl::SendTo(size_t k, std::span<const uint8_t> frame) {
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
Status CoordinatorImpl::Handshake(const std::vector<StageSpec>& specs) {
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
    // A stage that has acknowledged is heartbeaten and watched like the
    // others while the rest load: it answers only heartbeats, and the loop
    // after the handshake would find it silent for as long as the slowest
    // stage took to load.
    for (size_t k = 0; k < n; ++k) {
      if (Status refused = links_[k].monitor.Check(); !refused.ok()) {
        return refused.WithContext(Describe(k));
      }
      if (!acked[k] && now >= deadline) {
        return TimeoutError(Describe(k) + " did not finish loading within " +
                            Ms(config_.request_timeout));
      }
      if (links_[k].liveness.IsDead(now)) {
        return DisconnectedError(Describe(k) + (acked[k] ? " stopped answering while the other "
                                                           "stages loaded"
                                                         : " did not answer the handshake") +
                                 ": nothing received for " +
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
      LOCKSTEP_RETURN_IF_ERROR(OnHandshakeMessage(k, *m, &done));
      if (done) acked[k] = true;
    }
  }
  return Status::Ok();
}

Status CoordinatorImpl::OnHandshakeMessage(size_t k, const wire::Message& m, bool* acked) {
  LOCKSTEP_RETURN_IF_ERROR(CheckAssignReply(Describe(k), k, workers_[k].spec, seed_, m,
                                            &links_[k].hello_seen, acked));
  if (const auto* hello = std::get_if<wire::Hello>(&m)) workers_[k].hello = *hello;
  if (const auto* ack = std::get_if<wire::AssignAck>(&m); ack != nullptr && *acked) {
    workers_[k].resident_bytes = ack->resident_bytes;
  }
  return Status::Ok();
}

}  // namespace lockstep
