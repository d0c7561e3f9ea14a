#include "coordinator/loop_baton.h"

namespace lockstep {

void LoopBaton::TakeForIoThread() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    const auto now = Clock::now();
    if (holder_ == Holder::kNone &&
        (hand_back_now_ || stop_requested_ || now >= released_at_ + hand_back_)) {
      break;
    }
    // While a session thread runs the loop, look again every hand_back_:
    // it lets go without a wake-up unless others need the loop at once.
    cv_.wait_until(lock, (holder_ == Holder::kNone ? released_at_ : now) + hand_back_);
  }
  holder_ = Holder::kIoThread;
  hand_back_now_ = false;
}

bool LoopBaton::LetGoFromIoThread() {
  // Decided under mu_, so a session thread either finds the loop free or
  // is counted waiting.
  std::lock_guard<std::mutex> lock(mu_);
  if (waiting_ > 0) return false;
  holder_ = Holder::kNone;
  released_at_ = Clock::now();
  return true;
}

void LoopBaton::Drop() {
  std::lock_guard<std::mutex> lock(mu_);
  holder_ = Holder::kNone;
}

bool LoopBaton::TakeForSession() {
  std::lock_guard<std::mutex> lock(mu_);
  if (holder_ == Holder::kNone && !stop_requested_) {
    holder_ = Holder::kSession;
    return true;
  }
  ++waiting_;
  return false;
}

void LoopBaton::LetGoFromSession(bool urgent) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    holder_ = Holder::kNone;
    released_at_ = Clock::now();
    hand_back_now_ = wake = urgent || waiting_ > 0;
  }
  if (wake) cv_.notify_all();
}

void LoopBaton::DoneWaiting() {
  std::lock_guard<std::mutex> lock(mu_);
  --waiting_;
}

void LoopBaton::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_requested_ = true;
  }
  cv_.notify_all();
}

}  // namespace lockstep
