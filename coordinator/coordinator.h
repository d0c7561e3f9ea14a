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
// docs/runtime.md; LoopBaton): one session's step then crosses no thread
// handoff in the coordinator. The I/O thread runs it otherwise: at once
// when another session's request is outstanding, else once no session
// thread has run it for a short while. A request unanswered for
// request_timeout fails with Timeout. Nothing waits unboundedly.
//
// Recovery (docs/deployment.md): a worker silent for heartbeat * liveness
// is dead. With a spare left in the config, the I/O thread assigns the dead
// stage's layers to the next spare, then re-Assigns the two neighbours in
// place (the previous stage's next hop becomes the spare, the next stage
// accepts the spare as its upstream; their sessions are kept) and bumps
// the recovery epoch. Requests in flight fail meanwhile; each RemoteSession
// notices the new epoch, reopens itself under a fresh id and replays its
// history, then retries its step. With no spare left (or a failure during
// the re-wiring), every request in flight, and every later one, fails with
// Disconnected naming the dead worker's endpoint and stage, within
// heartbeat * liveness.
//
// This header is what callers use; the loop, the sockets and ZeroMQ stay
// behind it (coordinator_impl.h). Thread-safety: all public methods are
// thread-safe. A zmq context passed in must outlive the Coordinator, and
// the Coordinator every RemoteSession.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "coordinator/cluster_config.h"
#include "coordinator/remote_session.h"
#include "coordinator/session_link.h"
#include "engine/io/model_config.h"
#include "engine/model_loader.h"
#include "engine/sampling.h"
#include "engine/witness.h"
#include "wire/messages.h"

namespace zmq {
class context_t;
}  // namespace zmq

namespace lockstep {

class CoordinatorImpl;

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

class Coordinator final : public SessionLink {
 public:
  using StepReply = SessionLink::StepReply;
  using ReplyResult = SessionLink::ReplyResult;

  // `model`: InspectModelDir(config.model_dir, config.pins), done by the
  // caller when it needs the folder too (so it is hashed once). Without a
  // context the Coordinator makes and owns one (workers in other
  // processes); with one, inproc workers on the same context can be used.
  static Result<std::unique_ptr<Coordinator>> Start(const ClusterConfig& config, ModelInfo model);
  static Result<std::unique_ptr<Coordinator>> Start(zmq::context_t& context,
                                                    const ClusterConfig& config,
                                                    ModelInfo model);
  // The same, inspecting config.model_dir itself.
  static Result<std::unique_ptr<Coordinator>> Start(zmq::context_t& context,
                                                    const ClusterConfig& config);
  ~Coordinator() override;  // stops the I/O thread; workers keep running
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  const ModelConfig& model_config() const override;
  const ModelFiles& model_files() const;
  const WitnessSeed& seed() const;
  // The stages as the handshake at Start saw them (a recovery does not
  // change this list; stages() does).
  const std::vector<WorkerInfo>& workers() const;
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
  Status health() const override;
  WireStats stats() const;
  std::vector<StageReport> stage_reports() const;  // one per worker, in pipeline order

  // ---- the SessionLink (docs in session_link.h) ----
  // A request unanswered for request_timeout() fails with Timeout; Await
  // runs the I/O loop on the calling thread meanwhile if no other thread
  // runs it, and waits at most wait_bound().
  std::future<ReplyResult> Request(uint64_t session, uint32_t step, wire::Frame frame,
                                   uint32_t relay = 0) override;
  std::future<ReplyResult> Expect(uint64_t session, uint32_t step) override;
  void Post(uint64_t session, wire::Frame frame, bool release) override;
  ReplyResult Await(std::future<ReplyResult> reply, uint64_t session, uint32_t step) override;
  uint64_t NewSessionId() override;
  uint64_t epoch() const override;
  Status AwaitRecovery() const override;
  bool ship_logits() const override;

  std::chrono::milliseconds request_timeout() const;
  // The longest a caller can wait for a Request (timeout plus detection).
  std::chrono::milliseconds wait_bound() const;
  // Stages rebuilt on a spare so far (any thread).
  uint64_t recoveries() const;

 private:
  explicit Coordinator(std::unique_ptr<zmq::context_t> owned);

  std::unique_ptr<zmq::context_t> owned_context_;  // outlives impl_
  std::unique_ptr<CoordinatorImpl> impl_;
};

}  // namespace lockstep
