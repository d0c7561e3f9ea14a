// Worker: the daemon that serves one pipeline stage (docs/runtime.md).
//
// Two threads. The I/O thread (the caller of Run) owns every socket: the
// ROUTER it listens on (the coordinator and the previous stage connect to
// it) and, once assigned, a DEALER to the next stage. It answers
// heartbeats at once, verifies frames as they arrive, and hands messages
// to the compute thread, which runs them on the StageHost (model, KV
// caches). Results travel back through a Mailbox; the I/O thread sends
// them. Hidden frames go straight to the next stage, logits and error
// reports to the coordinator that assigned the stage. The Worker is the
// poll loop and the threads over parts tested alone: who may send what
// (peer_policy.h, admission.h), the queue to the compute thread and which
// steps run inline (compute_queue.h), applying works with batching
// (stage_runner.h), and the links to the next and first stage
// (stage_links.h).
//
// Decode steps run inline: when every message handed to the compute thread
// has been applied (nothing queued or running), the I/O thread runs the
// decode steps it has just read itself (batched as the compute thread
// would) and sends their frames at once, saving the two thread handoffs of
// a step. Anything else, or a step arriving while the compute thread is
// busy, is queued behind what is there, so a session's messages keep their
// order. An inline step holds heartbeats back while it runs, so steps run
// inline only while the last decode pass (on either thread) took at most
// kMaxInlineStep: a stage whose steps are long (a large model, a slow or
// loaded host) runs them on the compute thread and keeps answering
// heartbeats, and the first pass, of unknown length, runs there too. A long
// prefill or a load always runs on the compute thread. Both threads pin
// FTZ/DAZ before any arithmetic (§1.3).
//
// Failure semantics: a bad frame, unknown session or failed forward pass
// is reported to the coordinator as an ErrorReport; the daemon keeps
// serving. Only Shutdown from the holding coordinator, or Stop(), ends Run.
//
// Trust (docs/deployment.md; the rules are PeerPolicy's): one coordinator
// holds the worker at a time: the connection whose Assign it accepted.
// Another connection's Assign, whatever its key, is refused at once
// (Overloaded) while the holder is alive (its connection up, heard within
// orphan_after); once it is gone the next Assign takes the worker and the
// old sessions are dropped. Session traffic is accepted only from the
// holder and from its upstream stage; token inputs only from the holder,
// except relayed steps, which the first stage takes only from the last
// stage (and from nobody else, the holder included); Shutdown only from
// the holder. An Assign is checked whole before it is accepted (layers,
// links, no next hop that is this worker under any name). Anything else,
// and every frame that breaks a limit (WorkerOptions::limits, checked
// before it is queued), is answered with an ErrorReport to its sender
// alone: no other peer's session is touched or failed.
//
// Thread-safety: Stop() may be called from any thread; everything else
// from the thread that calls Run. The zmq context must outlive the Worker.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <zmq.hpp>

#include "base/status.h"
#include "engine/model_loader.h"
#include "wire/frame_pool.h"
#include "wire/messages.h"
#include "wire/transport.h"
#include "base/limits.h"
#include "base/mailbox.h"
#include "worker/compute_queue.h"
#include "worker/peer_policy.h"
#include "worker/stage_host.h"
#include "worker/stage_links.h"
#include "worker/stage_runner.h"

namespace lockstep {

struct WorkerOptions {
  std::string listen;                // e.g. "tcp://0.0.0.0:5555", "tcp://127.0.0.1:*"
  std::string name;                  // for messages; default "worker@<bound endpoint>"
  // The listening ROUTER. Its security is the worker's: own CURVE key pair
  // and the allow-list of coordinators (an Assign adds the upstream stage's
  // key), or insecure plaintext. The next-hop DEALER presents the same key
  // pair and pins the key the Assign names for the next stage.
  wire::TransportOptions transport;
  wire::TransportOptions next_hop_transport;  // the DEALER to the next stage (security unused)
  ComputeOptions compute;  // kernels, threads, weight format (same bits for all)
  // Serve this model folder whatever path an Assign names (hosts that keep
  // the model elsewhere). The hashes are still checked against the Assign.
  std::string model_dir_override;
  // Sessions are dropped when the coordinator that assigned this worker has
  // sent nothing (not even a heartbeat) for this long: it is gone.
  std::chrono::milliseconds orphan_after{60000};
  // Decode steps of different sessions queued together run as one batched
  // pass of at most this many rows (1: one step at a time).
  size_t max_batch = 16;
  // Test hook: after taking a decode step, the compute thread waits up to
  // this long for more to batch with it (0: only what is already queued).
  std::chrono::milliseconds batch_window_for_testing{0};
  // Test hook: loading an assigned stage also sleeps this long (a large one).
  std::chrono::milliseconds load_delay_for_testing{0};
  // Test hook: every decode pass also sleeps this long (a slow stage).
  std::chrono::milliseconds step_delay_for_testing{0};
  // Test hook, called on the compute thread with every verified hidden frame.
  std::function<void(const wire::HiddenFrame&)> observe_hidden_for_testing;
  // Request bounds (base/limits.h): prompt tokens, sessions and frame bytes
  // are checked on arrival; frame_bytes also caps transport.max_message_bytes.
  Limits limits;
};

class Worker {
 public:
  // Binds the listening socket. Io if the endpoint is in use.
  static Result<std::unique_ptr<Worker>> Create(zmq::context_t& context, WorkerOptions options);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The bound endpoint, ephemeral port resolved.
  const std::string& endpoint() const { return endpoint_; }
  const std::string& name() const { return options_.name; }

  // Starts the compute thread (which pins FTZ/DAZ and runs the §1.3
  // self-test; on failure Run returns that error without serving), then
  // serves until Shutdown or Stop(). Returns Ok on a clean stop.
  Status Run();
  void Stop() { stop_.store(true); }
  // Sessions held right now (updated by the compute thread; any thread).
  size_t session_count() const { return session_count_.load(); }
  // Batched passes that ran more than one session's decode step, and the
  // rows they ran (any thread).
  uint64_t batched_steps() const { return batched_steps_.load(); }
  uint64_t batched_rows() const { return batched_rows_.load(); }

 private:
  using Work = ComputeWork;

  Worker(zmq::context_t& context, WorkerOptions options, wire::Server server);
  std::unique_ptr<StageHost> MakeHost();
  // Runs works on host_; inline_io: the I/O thread's, which sends results
  // at once (Publish).
  StageRunner MakeRunner(bool inline_io);

  void ComputeMain(std::promise<Status>* pinned);
  // Publishes the host's counters and hands the results to the I/O thread
  // (or, inline, sends them).
  void Publish(std::vector<Outgoing>* out, bool inline_io);
  void ServeLoop();
  // The decode steps the queue held to run inline, run on the I/O thread.
  void RunInline(StageRunner& io, std::vector<Work>* works);
  // Sends what the compute thread finished.
  void DeliverComputed();
  void OnIncoming(const wire::Incoming& in);
  void CheckCoordinator();
  void OnUnparsable(const wire::Incoming& in, PeerRole role, const Status& st);
  void Deliver(Outgoing& o);
  // A relayed step to the first stage: over the ring link, or (one stage
  // that is first and last) into this worker's own queue.
  Status SendRelayed(Outgoing& o);
  void ReportToCoordinator(const Status& st, std::optional<uint64_t> session);
  // Ok, or why `m` from a peer of `role` is refused (before any work).
  Status Admit(const wire::Incoming& in, PeerRole role, const wire::Message& m);
  // Ok, or why the Assign `a` from `in`'s peer is refused (before any work).
  Status AdmitAssign(const wire::Incoming& in, const wire::Assign& a);
  // Whether a frame to the holding coordinator can still be delivered.
  bool HolderConnected();
  // Applies an admitted Assign from `in`'s peer to the I/O thread's state.
  void TakeAssign(const wire::Incoming& in, const wire::Assign& a);
  // An ErrorReport to one peer only.
  void ReplyError(const std::string& peer, const Status& st, std::optional<uint64_t> session);
  void Log(const std::string& line) const;

  WorkerOptions options_;
  wire::Server server_;
  std::string endpoint_;
  StageLinks links_;                   // I/O thread: to the next stage and the first
  PeerPolicy policy_;                  // I/O thread: who holds the worker, who may send what
  uint32_t stage_index_ = 0;           // this worker's stage (last Assign)
  std::set<uint64_t> open_sessions_;   // I/O thread: opened or forked and not released
  std::unique_ptr<StageHost> host_;    // made by Run; see "Decode steps run inline"
  ComputeQueue queue_;                 // I/O -> compute, and the inline steps
  Mailbox<Outgoing> outbox_;           // compute -> I/O
  wire::FramePool frames_;             // sent frames, back to the compute thread
  std::thread compute_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> session_count_{0};
  std::atomic<uint64_t> batched_steps_{0};
  std::atomic<uint64_t> batched_rows_{0};
  std::atomic<uint64_t> compute_nanos_{0};  // the StageHost's, as of the last Publish
};

}  // namespace lockstep
