// LoopBaton: who runs the coordinator's I/O loop right now — nobody, the
// I/O thread, or one session thread waiting for its own reply (replies
// awaited inline, docs/runtime.md). The loop's state passes between those
// threads with the baton's mutex: whoever holds the baton may touch it.
//
// Rules: a session thread about to wait takes the baton if nobody holds it
// (and then runs the loop until its reply is there), else it is counted as
// waiting. The I/O thread takes the baton once nobody holds it and either
// the last holder asked for it at once (requests of others outstanding, a
// thread waiting, a stop) or `hand_back` has passed since the last session
// thread let go: a session stepping token after token keeps the loop, and
// heartbeats are at most hand_back late. The I/O thread keeps the baton
// while anything is outstanding or a session thread waits.
//
// Thread-safety: all methods are thread-safe; TakeForIoThread, LetGoFrom-
// IoThread and Drop are the I/O thread's, the others session threads'.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <mutex>

namespace lockstep {

class LoopBaton {
 public:
  using Clock = std::chrono::steady_clock;

  explicit LoopBaton(std::chrono::milliseconds hand_back) : hand_back_(hand_back) {}

  // I/O thread: blocks until it should run the loop (see the rules), then
  // holds the baton. Returns at once after Stop().
  void TakeForIoThread();
  // I/O thread, nothing outstanding: lets go unless a session thread waits
  // for a reply, in which case it keeps the baton and returns false.
  bool LetGoFromIoThread();
  // I/O thread, for good (the loop stopped).
  void Drop();

  // Session thread about to wait for a reply: true when it now holds the
  // baton (it runs the loop, then calls LetGoFromSession), false when it
  // is counted waiting (it waits, then calls DoneWaiting). Never true
  // after Stop().
  bool TakeForSession();
  // urgent: the I/O thread must take the loop at once (others' requests
  // outstanding, or the loop stopped); so it must when threads wait.
  void LetGoFromSession(bool urgent);
  void DoneWaiting();

  // The owner is going away: the I/O thread takes the loop at once.
  void Stop();

 private:
  enum class Holder { kNone, kIoThread, kSession };

  const std::chrono::milliseconds hand_back_;
  std::mutex mu_;
  std::condition_variable cv_;  // the I/O thread waits here for the baton
  Holder holder_ = Holder::kNone;
  bool hand_back_now_ = true;  // the I/O thread takes the baton at once
  bool stop_requested_ = false;
  size_t waiting_ = 0;  // session threads waiting on a reply, not holding the baton
  Clock::time_point released_at_;  // a session thread (or the I/O thread) last let go
};

}  // namespace lockstep
