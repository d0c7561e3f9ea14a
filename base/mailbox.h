// Mailbox<T>: a FIFO handed between threads, with an eventfd that a ZeroMQ
// poll loop can wait on next to its sockets (zmq_pollitem_t::fd). Used
// where a socket-owning I/O thread talks to threads that must not touch
// its sockets: a worker's compute thread, a coordinator's session threads.
//
// Thread-safe: any thread may Push; Drain is for the polling thread,
// PopWait for a consumer without sockets. Linux only (eventfd).
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>

namespace lockstep {

template <typename T>
class Mailbox {
 public:
  Mailbox() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Mailbox() {
    if (fd_ >= 0) close(fd_);
  }
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;

  // Readable (POLLIN) while items may be waiting; -1 if eventfd failed.
  int fd() const { return fd_; }
  bool ok() const { return fd_ >= 0; }

  void Push(T item) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      items_.push_back(std::move(item));
    }
    cv_.notify_one();
    const uint64_t one = 1;
    if (fd_ >= 0) (void)!write(fd_, &one, sizeof one);
  }

  // Takes everything queued and clears the fd's readiness. A Push racing
  // with Drain is either returned now or leaves the fd readable.
  std::deque<T> Drain() {
    uint64_t count = 0;
    if (fd_ >= 0) (void)!read(fd_, &count, sizeof count);
    std::deque<T> out;
    std::lock_guard<std::mutex> lock(mu_);
    out.swap(items_);
    return out;
  }

  // Waits up to `timeout` for one item.
  std::optional<T> PopWait(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [this] { return !items_.empty(); })) return std::nullopt;
    T item = std::move(items_.front());
    items_.pop_front();
    return item;
  }

 private:
  int fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

}  // namespace lockstep
