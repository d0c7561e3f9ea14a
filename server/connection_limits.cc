#include "server/connection_limits.h"

namespace lockstep::server {

ConnectionLimits::Admit ConnectionLimits::TryOpen(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  if (open_ >= total_) return Admit::kServerFull;
  size_t& mine = by_client_[client];
  if (mine >= per_client_) return Admit::kClientFull;
  ++mine;
  ++open_;
  return Admit::kYes;
}

void ConnectionLimits::Close(const std::string& client) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_client_.find(client);
  if (it == by_client_.end() || it->second == 0) return;  // not admitted: a caller's bug
  if (--it->second == 0) by_client_.erase(it);
  if (--open_ == 0) none_open_.notify_all();
}

size_t ConnectionLimits::open() const {
  std::lock_guard<std::mutex> lock(mu_);
  return open_;
}

size_t ConnectionLimits::open_from(const std::string& client) const {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = by_client_.find(client);
  return it == by_client_.end() ? 0 : it->second;
}

void ConnectionLimits::WaitUntilNoneOpen() {
  std::unique_lock<std::mutex> lock(mu_);
  none_open_.wait(lock, [this] { return open_ == 0; });
}

}  // namespace lockstep::server
