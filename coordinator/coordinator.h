// Coordinator: drives a pipeline of workers (docs/runtime.md).
//
// Start() takes the model folder's identity (hashes, config, digests: never
// the weights; InspectModelDir, once per process), validates the plan
// before any worker is contacted, then
// assigns every worker its layers and refuses any worker whose Hello shows
// different artifact hashes, table_digest or inv_freq_table_digest. After
// that, sessions (RemoteSession, a StepBackend) can run RunDecode from any
// number of threads at once; their steps overlap across stages.
//
// Threads: one thread at a time runs the I/O loop, which owns every socket
// (a DEALER per worker), sends heartbeats and checks liveness; session
// threads hand it commands through a Mailbox and wait on futures. A session
// thread that waits for its step's reply while no other thread runs the
// loop runs it itself until the reply is there (replies awaited inline,
// docs/runtime.md): one session's step then crosses no thread handoff in
// the coordinator. The I/O thread runs it otherwise: at once when another
// session's request is outstanding, else once no session thread has run it
// for kHandBack. A request unanswered for request_timeout fails with
// Timeout. Nothing waits unboundedly.
//
// Recovery (docs/deployment.md): a worker silent for heartbeat * liveness
// is dead. With a spare left in the config, the I/O thread assigns the dead
// stage's layers to the next spare, then re-Assigns the two neighbours in
// place (the previous stage's next hop becomes the spare, the next stage
// accepts the spare as its upstream; their sessions are kept) and bumps
// the recovery epoch. Requests in flight fail meanwhile; each RemoteSession
// notices the new epoch, reopens itself under a fresh id and replays its
// history (the same feeds, in the same chunks, and the same evictions), so
// every stage's cache is rebuilt bit-identically, then retries its step.
// With no spare left (or a failure during the re-wiring), every request in
// flight, and every later one, fails with Disconnected naming the dead
// worker's endpoint and stage, within heartbeat * liveness.
//
// Thread-safety: all public methods are thread-safe. The zmq context must
// outlive the Coordinator, and the Coordinator every RemoteSession.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include <zmq.hpp>

#include "base/status.h"
#include "coordinator/cluster_config.h"
#include "coordinator/link_monitor.h"
#include "engine/decode.h"
#include "engine/io/model_config.h"
#include "engine/model_loader.h"
#include "engine/sampling.h"
#include "engine/witness.h"
#include "wire/liveness.h"
#include "wire/messages.h"
#include "wire/transport.h"
#include "base/mailbox.h"

namespace lockstep {

class RemoteSession;

// One pipeline stage as the coordinator sees it after the handshake.
struct WorkerInfo {
  size_t index = 0;  // position in the pipeline
  std::string endpoint;
  StageSpec spec;
  wire::Hello hello;
  uint64_t resident_bytes = 0;  // VmRSS the worker reported after loading
  std::string curve_public;     // its pinned CURVE key (Z85); "" on plaintext links
  std::string Describe() const;  // "worker tcp://... (stage 1, layers [10,20))"
};

struct WireStats {
  uint64_t bytes_sent = 0, bytes_received = 0;
  uint64_t frames_sent = 0, frames_received = 0;
};

// One stage as it is now (Coordinator::stages()): the worker serving it,
// which after a recovery is the spare, whether it serves, and the workers
// it was moved off (dead, or a spare that failed to take it), oldest first.
struct StageState {
  std::string endpoint;
  int lo = 0, hi = 0;
  Status status;  // Ok, or why it does not serve: dead, being rebuilt
  std::vector<std::string> replaced;
};

// What a worker reported in its last heartbeat reply (zero until then):
// its stage's time on steps and the bytes it sent to the next stage.
struct StageReport {
  uint64_t compute_nanos = 0;
  uint64_t bytes_to_next = 0;
};

class Coordinator {
 public:
  // What the last stage answers for a step: its logits, or (for a step
  // that carried a chain handoff) its StepResult.
  using StepReply = std::variant<wire::Logits, wire::StepResult>;
  using ReplyResult = Result<StepReply>;

  // `model`: InspectModelDir(config.model_dir, config.pins), done by the
  // caller when it needs the folder too (so it is hashed once).
  static Result<std::unique_ptr<Coordinator>> Start(zmq::context_t& context,
                                                    const ClusterConfig& config,
                                                    ModelInfo model);
  // The same, inspecting config.model_dir itself.
  static Result<std::unique_ptr<Coordinator>> Start(zmq::context_t& context,
                                                    const ClusterConfig& config);
  ~Coordinator();  // stops the I/O thread; workers keep running
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  const ModelConfig& model_config() const { return model_.config; }
  const ModelFiles& model_files() const { return model_.files; }
  const WitnessSeed& seed() const { return seed_; }
  // The stages as the handshake at Start saw them (a recovery does not
  // change this list; stages() does).
  const std::vector<WorkerInfo>& workers() const { return workers_; }
  // Every stage as it is now, in pipeline order (any thread).
  std::vector<StageState> stages() const;
  std::string plan_text() const;

  // A new session. window: W for every layer, else the model's own windows.
  // sampling: how its tokens are chosen, fixed for the session (Invalid if
  // ValidateSamplingParams refuses it). trace: every step reports its
  // per-layer digests (RemoteSession::StepTrace). reserve_positions: the
  // cache length the session is expected to reach (prompt + gen), reserved
  // up front on every stage within its limits (0: none; never a limit).
  Result<std::unique_ptr<RemoteSession>> OpenSession(std::optional<int> window,
                                                     const SamplingParams& sampling = {},
                                                     bool trace = false,
                                                     uint32_t reserve_positions = 0);

  // Asks every worker to exit (best effort; returns at once).
  void ShutdownWorkers(const std::string& reason);

  // Ok, or why the cluster cannot serve any more (a dead worker).
  Status health() const;
  WireStats stats() const;
  std::vector<StageReport> stage_reports() const;  // one per worker, in pipeline order

  // ---- for RemoteSession ----
  // Sends `frame` to the first stage and resolves with the Logits or
  // StepResult of (session, step), an ErrorReport for the session, or a
  // failure. relay: the TokenInput in `frame` asks for that many relayed
  // steps after this one (steps step+1 .. step+relay), whose StepResults
  // are kept as they come until Expect asks for them.
  std::future<ReplyResult> Request(uint64_t session, uint32_t step, wire::Frame frame,
                                   uint32_t relay = 0);
  // Resolves with the StepResult of a relayed step (sends nothing), an
  // ErrorReport for the session, or a failure; Invalid for a step no
  // Request asked to relay.
  std::future<ReplyResult> Expect(uint64_t session, uint32_t step);
  // Sends `frame` to the first stage (session control, forwarded down the
  // pipeline in order). release: forget the session's pending errors.
  void Post(uint64_t session, wire::Frame frame, bool release);
  // Waits up to wait_bound() for a Request's reply, running the I/O loop on
  // the calling thread meanwhile if no other thread runs it. Timeout naming
  // (session, step) if the reply did not come.
  ReplyResult Await(std::future<ReplyResult> reply, uint64_t session, uint32_t step);
  uint64_t NewSessionId() { return next_session_.fetch_add(1); }
  std::chrono::milliseconds request_timeout() const { return config_.request_timeout; }
  bool ship_logits() const { return config_.ship_logits; }
  // The longest a caller can wait for a Request (timeout plus detection).
  std::chrono::milliseconds wait_bound() const;
  // Recoveries started so far: a session opened or rebuilt at an older
  // epoch must rebuild itself before its next step.
  uint64_t epoch() const { return epoch_.load(); }
  // Waits until no recovery is in progress: Ok, or why the cluster is
  // broken (no spare could take the dead stage), or Timeout.
  Status AwaitRecovery() const;
  // Stages rebuilt on a spare so far (any thread).
  uint64_t recoveries() const;

 private:
  struct Command {
    enum class Kind { kPost, kRequest, kExpect, kShutdownWorkers, kStop };
    Kind kind = Kind::kPost;
    uint64_t session = 0;
    uint32_t step = 0;
    bool release = false;
    wire::Frame frame;
    std::shared_ptr<std::promise<ReplyResult>> promise;
    uint32_t relay = 0;  // kRequest: relayed steps asked for after `step`
  };
  // A session's relayed steps still to come: [next, last], and the results
  // that arrived before Expect asked for them (at most last - next + 1).
  struct Relay {
    uint32_t next = 0;
    uint32_t last = 0;
    std::deque<wire::StepResult> early;
  };
  struct Pending {
    uint32_t step = 0;
    std::chrono::steady_clock::time_point deadline;
    std::shared_ptr<std::promise<ReplyResult>> promise;
  };
  struct Link {  // one DEALER per worker, owned by the I/O thread
    wire::Client client;
    wire::PeerLiveness liveness;
    std::chrono::steady_clock::time_point last_heartbeat;
    bool hello_seen = false;  // its worker sent the Hello of an Assign
    LinkMonitor monitor;      // its failed CURVE handshakes
    Status refused;           // the last one (named when the worker seems dead)
  };
  // A dead stage being rebuilt (I/O thread). kLoading: the spare loads the
  // stage; kRewiring: the neighbours take the spare as next hop/upstream.
  struct Recovery {
    enum class Phase { kLoading, kRewiring };
    size_t stage = 0;
    Status cause;  // the death, naming the dead worker
    Phase phase = Phase::kLoading;
    std::vector<size_t> awaiting;  // stages whose AssignAck is due
    std::chrono::steady_clock::time_point deadline;
  };

  Coordinator(zmq::context_t& context, ClusterConfig config);
  Status Connect();
  Result<Link> MakeLink(const std::string& endpoint, const std::string& key) const;
  wire::Assign MakeAssign(size_t k) const;
  Status Handshake(const std::vector<StageSpec>& specs);
  // record: the WorkerInfo to fill in (the handshake at Start), or null.
  Status OnHandshakeMessage(size_t k, const wire::Message& m, bool* acked, WorkerInfo* record);
  Status CheckHello(size_t k, const wire::Hello& hello) const;
  // Who runs the I/O loop; guarded by drive_mu_.
  enum class Driver { kNone, kIoThread, kSession };
  void IoMain();
  // The I/O thread: waits until it should run the loop and takes it.
  void TakeLoopForIoThread();
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
  // A StepResult nobody waits for yet: kept when it is a relayed step to come.
  bool KeepRelayed(wire::StepResult& result);
  // The relay bookkeeping once the result of (session, step) is handed out.
  void RelayTaken(uint64_t session, uint32_t step);
  void ReceiveFrom(size_t k, const std::future<ReplyResult>* awaited);
  void OnMessage(size_t k, const wire::Incoming& in);
  void Resolve(uint64_t session, ReplyResult result);
  void FailAll(const Status& st);
  void Tick(std::chrono::steady_clock::time_point now);
  Status SendTo(size_t k, std::span<const uint8_t> frame);
  std::string Describe(size_t k) const;
  // ---- recovery (I/O thread; coordinator_recovery.cc) ----
  void OnDead(size_t k, const Status& dead);
  void TrySpare();
  bool OnRecoveryMessage(size_t k, const wire::Message& m);
  void RecoveryFailed(const Status& st);
  void AdvanceRecovery();
  void CheckRecoveryDeadline(std::chrono::steady_clock::time_point now);
  void Break(const Status& st);
  // Publishes stage k's current worker (endpoints_[k]) and status to stages().
  void SetStage(size_t k, const Status& st);

  zmq::context_t& context_;
  ClusterConfig config_;
  ModelInfo model_;
  WitnessSeed seed_;
  std::vector<std::vector<wire::WeightFile>> weight_files_;  // [worker] sent in its Assign
  std::vector<WorkerInfo> workers_;
  std::vector<Link> links_;            // I/O thread (handshake: the caller)
  std::vector<std::string> endpoints_;  // I/O thread: each stage's current worker
  std::vector<std::string> keys_;       // I/O thread: their pinned keys ("" if none)
  std::string identity_;                // this coordinator's DEALER identity
  size_t next_spare_ = 0;               // I/O thread: config_.spares used so far
  std::optional<Recovery> recovery_;    // I/O thread
  std::vector<wire::Frame> deferred_;   // I/O thread: posts held during a recovery
  bool shutting_down_ = false;          // I/O thread: ShutdownWorkers was sent
  std::map<uint64_t, Pending> pending_;  // I/O thread
  std::map<uint64_t, Status> sticky_;    // I/O thread: errors with no request waiting
  std::map<uint64_t, Relay> relays_;     // I/O thread: sessions with relayed steps to come
  bool dead_ = false;                    // I/O thread: a worker died (see broken_)
  bool stopped_ = false;                 // I/O loop: a kStop was taken
  std::vector<zmq_pollitem_t> items_;    // I/O loop: one turn's poll items
  Mailbox<Command> inbox_;
  std::thread io_;

  // Who runs the I/O loop (see "Threads" above). The loop's state (links_,
  // pending_, ...) passes between threads with this mutex.
  std::mutex drive_mu_;
  std::condition_variable drive_cv_;  // the I/O thread waits here for the loop
  Driver driver_ = Driver::kNone;
  bool hand_back_now_ = true;     // the I/O thread takes the loop at once
  bool stop_requested_ = false;   // the destructor runs
  size_t waiting_ = 0;            // session threads waiting on a reply, not running the loop
  std::chrono::steady_clock::time_point released_at_;  // a session thread last let go
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

// A session on a Coordinator: a StepBackend whose Feed sends the tokens to
// the first stage and waits for the last stage's logits, and whose
// FeedAndChoose hands the witness chain along with the tokens and gets back
// the token, the logits' sha256 and the advanced chain (unless the cluster
// ships logits, when it chooses from the logits itself). It keeps its
// history (every feed and eviction, 4 bytes per token fed) to rebuild
// itself after a recovery (see Coordinator). Released on the workers when
// destroyed. Thread-compatible (one thread drives a session).
//
// Relayed steps: after ExpectChainedSteps(n), the next FeedAndChoose asks
// the pipeline to relay n steps after it: the last stage sends each chosen
// token straight back to the first stage, so a step costs no round trip
// through the coordinator, and the session's next n FeedAndChoose calls
// only collect their StepResults. A call that does not continue the chain
// (another token, Feed, Evict, Fork, FeedWithoutOutput) first collects the
// steps still relayed and evicts their positions, which leaves every
// stage's cache as if they had never run (KV eviction is exact).
class RemoteSession final : public StepBackend {
 public:
  // open: the SessionOpen already posted for it (its id, window and
  // sampling), kept to reopen the session after a recovery.
  RemoteSession(Coordinator& coordinator, const wire::SessionOpen& open, uint32_t cache_length,
                const SamplingParams& sampling, uint64_t epoch);
  ~RemoteSession() override;
  RemoteSession(const RemoteSession&) = delete;
  RemoteSession& operator=(const RemoteSession&) = delete;

  Status Feed(std::span<const uint32_t> tokens, std::vector<float>* logits) override;
  // Invalid if ctx.sampling is not the session's (bit for bit); Corrupt if
  // the last stage answers with a token outside the vocabulary.
  Result<StepOutcome> FeedAndChoose(std::span<const uint32_t> tokens,
                                    const StepContext& ctx) override;
  // Validated locally (as KvCache::Evict would), then applied on every stage.
  Status Evict(uint32_t from, uint32_t count) override;
  // The next FeedAndChoose relays `steps` steps after it (not with
  // --ship-logits, which chooses on the coordinator).
  void ExpectChainedSteps(uint32_t steps) override { ahead_ = steps; }
  uint32_t CacheLength() const override { return length_; }
  // Traced sessions: the last step's digests, one per model layer (the
  // last stage's reply carries them; Corrupt if it has another count).
  std::span<const Digest> StepTrace() const override { return trace_; }

  // Several sessions' FeedAndChoose as one round (coordinator/
  // remote_session_batch.cc): every step is sent before any is awaited, so
  // the workers find them queued together and batch them, with no thread
  // per session. A session that cannot join the round (a relay or a
  // rebuild pending, --ship-logits, other sampling) runs FeedAndChoose by
  // itself after the round was sent. Each step's outcome or failure goes
  // to its own out/status; one session's failure does not touch another.
  struct BatchedStep {
    RemoteSession* session = nullptr;
    std::span<const uint32_t> tokens;
    const StepContext* ctx = nullptr;
    StepOutcome* out = nullptr;
    Status* status = nullptr;
  };
  static void FeedAndChooseAll(std::span<const BatchedStep> steps);

  // Feeds tokens whose outputs nobody needs (a prompt chunk that is not the
  // last): sent with no_output, so the last stage computes no logits and
  // replies nothing, and not awaited. A failure surfaces at the session's
  // next awaited step (the coordinator keeps a session's first error).
  Status FeedWithoutOutput(std::span<const uint32_t> tokens);

  // A new session holding a copy of this one's cache (prefix reuse).
  Result<std::unique_ptr<RemoteSession>> Fork();
  // The session's id on the workers (a rebuild gives it a fresh one).
  uint64_t id() const { return open_.session_id; }

 private:
  // What the session did to its cache, in order: the replay of a rebuild.
  struct Op {
    bool evict = false;
    uint32_t a = 0;  // feed: tokens taken from fed_; evict: from
    uint32_t b = 0;  // evict: count
  };

  // The relay in progress: steps the pipeline still runs by itself, the
  // token the next one feeds (the last outcome's) and its decode step.
  struct Relay {
    uint32_t left = 0;
    uint32_t token = 0;
    uint32_t decode_step = 0;
  };

  // Whether a step can join a FeedAndChooseAll round as it is.
  bool CanJoinRound(const StepContext& ctx);
  // The tail of a round's step once its reply came (as Send and
  // FeedAndChoose finish a step).
  Result<StepOutcome> FinishRound(std::span<const uint32_t> tokens, const StepContext& ctx,
                                  Coordinator::ReplyResult reply);

  // Sends the tokens (with `handoff`, if any, asking for `relay` relayed
  // steps after it) and waits for the reply, rebuilding the session first
  // whenever a recovery happened since it was last built; records the feed
  // in the history once it succeeded.
  Result<Coordinator::StepReply> Send(std::span<const uint32_t> tokens,
                                      std::optional<wire::ChainHandoff> handoff,
                                      uint32_t relay = 0);
  // One TokenInput at `first_position` and its reply, or the failure.
  Result<Coordinator::StepReply> Exchange(std::span<const uint32_t> tokens,
                                          uint32_t first_position,
                                          std::optional<wire::ChainHandoff> handoff,
                                          uint32_t relay = 0);
  // The StepResult of the next relayed step (whose request number is
  // step_ - relay_.left); advances relay_. The relay ends on any failure.
  Result<wire::StepResult> TakeRelayed();
  // Collects the steps still relayed and evicts their positions: the
  // session is then as if it had never run them.
  Status EndRelay();
  // A StepResult's token, trace and chain: the step's outcome.
  Result<StepOutcome> Outcome(wire::StepResult got, const StepContext& ctx);
  // Releases the session, reopens it under a fresh id and replays the
  // history; `epoch` is the coordinator's epoch it is rebuilt for.
  Status Rebuild(uint64_t epoch);
  Status CheckVocab(const char* what, uint64_t got) const;
  // The next step's input (numbers the step).
  wire::TokenInput NextInput(std::span<const uint32_t> tokens, uint32_t first_position);
  Status TakeTrace(std::vector<Digest> digests);

  Coordinator& coordinator_;
  wire::SessionOpen open_;  // open_.session_id is the session's current id
  uint32_t length_;
  uint32_t step_ = 0;
  SamplingParams sampling_;
  uint64_t epoch_;                // the recovery epoch it was (re)built at
  std::vector<uint32_t> fed_;     // every token fed, in order
  std::vector<Op> ops_;
  std::vector<Digest> trace_;     // [layers], the last step's when open_.trace
  uint32_t ahead_ = 0;            // ExpectChainedSteps' promise, for the next request
  Relay relay_;
};

}  // namespace lockstep
