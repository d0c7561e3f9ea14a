// CoordinatorImpl: the Coordinator's machinery behind coordinator.h — the
// handshake, the I/O loop over one DEALER per worker (heartbeats,
// liveness, commands from session threads), the book of replies owed
// (ReplyTable), who runs the loop (LoopBaton) and recovery on spares
// (RecoveryMachine, whose actions coordinator_recovery.cc carries out).
// Only coordinator/ includes this header: it is where ZeroMQ is.
//
// Threads as coordinator.h says: the loop's state (links_, replies_,
// recovery_, ...) belongs to whoever holds baton_; mu_ guards what any
// thread may read (health, stats, stages, reports). Thread-safety: the
// public methods are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "base/mailbox.h"
#include "base/status.h"
#include "coordinator/cluster_config.h"
#include "coordinator/coordinator.h"
#include "coordinator/link_monitor.h"
#include "coordinator/loop_baton.h"
#include "coordinator/recovery_machine.h"
#include "coordinator/reply_table.h"
#include "engine/model_loader.h"
#include "engine/witness.h"
#include "wire/liveness.h"
#include "wire/messages.h"
#include "wire/transport.h"

namespace lockstep {

class CoordinatorImpl {
 public:
  using ReplyResult = SessionLink::ReplyResult;

  // Coordinator::Start's work (coordinator.h).
  static Result<std::unique_ptr<CoordinatorImpl>> Start(zmq::context_t& context,
                                                        const ClusterConfig& config,
                                                        ModelInfo model);
  ~CoordinatorImpl();  // stops the I/O thread; workers keep running
  CoordinatorImpl(const CoordinatorImpl&) = delete;
  CoordinatorImpl& operator=(const CoordinatorImpl&) = delete;

  const ModelInfo& model() const { return model_; }
  const WitnessSeed& seed() const { return seed_; }
  const ClusterConfig& config() const { return config_; }
  const std::vector<WorkerInfo>& workers() const { return workers_; }
  std::vector<StageState> stages() const;
  std::string plan_text() const;
  Status health() const;
  WireStats stats() const;
  std::vector<StageReport> stage_reports() const;

  std::future<ReplyResult> Request(uint64_t session, uint32_t step, wire::Frame frame,
                                   uint32_t relay);
  std::future<ReplyResult> Expect(uint64_t session, uint32_t step);
  void Post(uint64_t session, wire::Frame frame, bool release);
  void ShutdownWorkers(const std::string& reason);
  ReplyResult Await(std::future<ReplyResult> reply, uint64_t session, uint32_t step);
  uint64_t NewSessionId() { return next_session_.fetch_add(1); }
  uint64_t epoch() const { return epoch_.load(); }
  std::chrono::milliseconds wait_bound() const;
  Status AwaitRecovery() const;
  uint64_t recoveries() const;

 private:
  // The I/O thread takes the loop back when no session thread has run it
  // for this long (and at once when another request is outstanding): a
  // session that decodes step after step keeps it, heartbeats are at most
  // this late.
  static constexpr std::chrono::milliseconds kHandBack{20};

  struct Command {
    enum class Kind { kPost, kRequest, kExpect, kShutdownWorkers, kStop };
    Kind kind = Kind::kPost;
    uint64_t session = 0;
    uint32_t step = 0;
    bool release = false;
    wire::Frame frame;
    ReplyTable::Promise promise;
    uint32_t relay = 0;  // kRequest: relayed steps asked for after `step`
  };
  struct Link {  // one DEALER per worker, owned by the I/O loop
    wire::Client client;
    wire::PeerLiveness liveness;
    std::chrono::steady_clock::time_point last_heartbeat;
    bool hello_seen = false;  // its worker sent the Hello of its Assign (the handshake)
    LinkMonitor monitor;      // its failed CURVE handshakes
    Status refused;           // the last one (named when the worker seems dead)
  };
  CoordinatorImpl(zmq::context_t& context, ClusterConfig config, ModelInfo model,
                  RecoveryMachine recovery);
  // ---- handshake (coordinator_handshake.cc; the caller's thread) ----
  Status Connect();
  Result<Link> MakeLink(const std::string& endpoint, const std::string& key) const;
  wire::Assign MakeAssign(size_t k) const;
  Status Handshake(const std::vector<StageSpec>& specs);
  // One message from stage k's worker (assign_reply.h), its Hello and
  // resident bytes recorded in workers_[k].
  Status OnHandshakeMessage(size_t k, const wire::Message& m, bool* acked);
  // ---- the I/O loop (coordinator.cc) ----
  void IoMain();
  // One turn of the loop: waits up to `wait` for the sockets and the inbox,
  // handles what came, then the timers. False once a kStop was taken.
  // `awaited` (a session thread's own reply): the turn ends as soon as it
  // is ready; what else came stays queued for the next turn.
  bool Turn(std::chrono::milliseconds wait,
            const std::future<ReplyResult>* awaited = nullptr);
  // Requests, a recovery or deferred posts the loop must see through.
  bool Outstanding() const;
  std::chrono::milliseconds NextWake(std::chrono::steady_clock::time_point now) const;
  void OnCommand(Command& c);
  // Health, a recovery in progress and the session's sticky error, in that
  // order: what a request or an expectation fails with before any wait.
  Status Admissible(uint64_t session);
  void OnExpect(Command& c);
  void ReceiveFrom(size_t k, const std::future<ReplyResult>* awaited);
  void OnMessage(size_t k, const wire::Incoming& in);
  void Tick(std::chrono::steady_clock::time_point now);
  Status SendTo(size_t k, std::span<const uint8_t> frame);
  std::string Describe(size_t k) const;
  static std::string Ms(std::chrono::milliseconds ms);  // "250 ms"
  // ---- recovery (coordinator_recovery.cc): events to recovery_, and
  // its actions carried out ----
  void OnDead(size_t k, const Status& dead);
  bool OnRecoveryMessage(size_t k, const wire::Message& m);
  // Links refused while their Assign reply is awaited, then the deadline.
  void CheckRecovery(std::chrono::steady_clock::time_point now);
  // In order; a send that fails is fed back (RecoveryMachine::OnAssign-
  // NotSent) and its actions replace those left.
  void Carry(std::vector<RecoveryAction> actions);
  Status CarryOut(const RecoveryAction& a);
  // Publishes stage k's worker and status to stages().
  void SetStage(size_t k, const std::string& endpoint, const Status& st);

  zmq::context_t& context_;
  ClusterConfig config_;
  ModelInfo model_;
  WitnessSeed seed_;
  std::vector<std::vector<wire::WeightFile>> weight_files_;  // [worker] sent in its Assign
  std::vector<WorkerInfo> workers_;
  std::vector<Link> links_;            // I/O loop (handshake: the caller)
  std::string identity_;                // this coordinator's DEALER identity
  RecoveryMachine recovery_;            // I/O loop: who serves each stage, recovery
  std::vector<wire::Frame> deferred_;   // I/O loop: posts held during a recovery
  ReplyTable replies_;                  // I/O loop
  bool stopped_ = false;                // I/O loop: a kStop was taken
  std::vector<zmq_pollitem_t> items_;   // I/O loop: one turn's poll items
  Mailbox<Command> inbox_;
  std::thread io_;
  LoopBaton baton_;
  std::atomic<uint64_t> next_session_{1};
  std::atomic<uint64_t> epoch_{0};

  mutable std::mutex mu_;  // guards broken_, recovering_, recoveries_, stats_, reports_, stages_
  mutable std::condition_variable recovered_;  // recovering_ cleared
  Status broken_;
  bool recovering_ = false;
  uint64_t recoveries_ = 0;
  WireStats stats_;
  std::vector<StageReport> reports_;
  std::vector<StageState> stages_;
};

}  // namespace lockstep
