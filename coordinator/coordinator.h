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
// Threads: one I/O thread owns every socket (a DEALER per worker) and
// sends heartbeats; session threads hand it commands through a Mailbox and
// wait on futures. A worker silent for heartbeat * liveness fails every
// request in flight, and every later one, with Disconnected naming its
// endpoint and stage; a request unanswered for request_timeout fails with
// Timeout. Nothing waits unboundedly.
//
// Thread-safety: all public methods are thread-safe. The zmq context must
// outlive the Coordinator, and the Coordinator every RemoteSession.
#pragma once

#include <atomic>
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
  std::string Describe() const;  // "worker tcp://... (stage 1, layers [10,20))"
};

struct WireStats {
  uint64_t bytes_sent = 0, bytes_received = 0;
  uint64_t frames_sent = 0, frames_received = 0;
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
  const std::vector<WorkerInfo>& workers() const { return workers_; }
  std::string plan_text() const;

  // A new session. window: W for every layer, else the model's own windows.
  // sampling: how its tokens are chosen, fixed for the session (Invalid if
  // ValidateSamplingParams refuses it).
  Result<std::unique_ptr<RemoteSession>> OpenSession(std::optional<int> window,
                                                     const SamplingParams& sampling = {});

  // Asks every worker to exit (best effort; returns at once).
  void ShutdownWorkers(const std::string& reason);

  // Ok, or why the cluster cannot serve any more (a dead worker).
  Status health() const;
  WireStats stats() const;

  // ---- for RemoteSession ----
  // Sends `frame` to the first stage and resolves with the Logits or
  // StepResult of (session, step), an ErrorReport for the session, or a
  // failure.
  std::future<ReplyResult> Request(uint64_t session, uint32_t step, wire::Frame frame);
  // Sends `frame` to the first stage (session control, forwarded down the
  // pipeline in order). release: forget the session's pending errors.
  void Post(uint64_t session, wire::Frame frame, bool release);
  uint64_t NewSessionId() { return next_session_.fetch_add(1); }
  std::chrono::milliseconds request_timeout() const { return config_.request_timeout; }
  bool ship_logits() const { return config_.ship_logits; }
  // The longest a caller can wait for a Request (timeout plus detection).
  std::chrono::milliseconds wait_bound() const;

 private:
  struct Command {
    enum class Kind { kPost, kRequest, kShutdownWorkers, kStop };
    Kind kind = Kind::kPost;
    uint64_t session = 0;
    uint32_t step = 0;
    bool release = false;
    wire::Frame frame;
    std::shared_ptr<std::promise<ReplyResult>> promise;
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
  };

  Coordinator(zmq::context_t& context, ClusterConfig config);
  Status Connect();
  Status Handshake(const std::vector<StageSpec>& specs);
  Status OnHandshakeMessage(size_t k, const wire::Message& m, bool* acked);
  Status CheckHello(size_t k, const wire::Hello& hello) const;
  void IoMain();
  std::chrono::milliseconds NextWake(std::chrono::steady_clock::time_point now) const;
  void OnCommand(Command& c);
  void ReceiveFrom(size_t k);
  void OnMessage(size_t k, const wire::Incoming& in);
  void Resolve(uint64_t session, ReplyResult result);
  void FailAll(const Status& st);
  void Tick(std::chrono::steady_clock::time_point now);
  Status SendTo(size_t k, std::span<const uint8_t> frame);
  std::string Describe(size_t k) const { return workers_[k].Describe(); }

  zmq::context_t& context_;
  ClusterConfig config_;
  ModelInfo model_;
  WitnessSeed seed_;
  std::vector<WorkerInfo> workers_;
  std::vector<Link> links_;            // I/O thread (handshake: the caller)
  std::map<uint64_t, Pending> pending_;  // I/O thread
  std::map<uint64_t, Status> sticky_;    // I/O thread: errors with no request waiting
  bool dead_ = false;                    // I/O thread: a worker died (see broken_)
  Mailbox<Command> inbox_;
  std::thread io_;
  std::atomic<uint64_t> next_session_{1};

  mutable std::mutex mu_;  // guards broken_ and stats_
  Status broken_;
  WireStats stats_;
};

// A session on a Coordinator: a StepBackend whose Feed sends the tokens to
// the first stage and waits for the last stage's logits, and whose
// FeedAndChoose hands the witness chain along with the tokens and gets back
// the token, the logits' sha256 and the advanced chain (unless the cluster
// ships logits, when it chooses from the logits itself). Released on the
// workers when destroyed. Thread-compatible (one thread drives a session).
class RemoteSession final : public StepBackend {
 public:
  RemoteSession(Coordinator& coordinator, uint64_t id, uint32_t cache_length,
                const SamplingParams& sampling);
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
  uint32_t CacheLength() const override { return length_; }

  // A new session holding a copy of this one's cache (prefix reuse).
  Result<std::unique_ptr<RemoteSession>> Fork();
  uint64_t id() const { return id_; }

 private:
  // Sends the tokens (with `handoff`, if any) and waits for the reply.
  Result<Coordinator::StepReply> Send(std::span<const uint32_t> tokens,
                                      std::optional<wire::ChainHandoff> handoff);
  Status CheckVocab(const char* what, uint64_t got) const;

  Coordinator& coordinator_;
  uint64_t id_;
  uint32_t length_;
  uint32_t step_ = 0;
  SamplingParams sampling_;
};

}  // namespace lockstep
