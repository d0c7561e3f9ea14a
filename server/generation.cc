#include "server/generation.h"

namespace lockstep::server {

void GenerationStream::PushToken(uint32_t token) {
  {
    std::lock_guard<std::mutex> l(mu_);
    tokens_.push_back(token);
  }
  cv_.notify_all();
}

void GenerationStream::Close(Finish finish) {
  {
    std::lock_guard<std::mutex> l(mu_);
    finish_ = std::move(finish);
  }
  cv_.notify_all();
}

bool GenerationStream::Wait(std::chrono::milliseconds timeout, std::vector<uint32_t>* tokens,
                            std::optional<Finish>* finish) {
  std::unique_lock<std::mutex> l(mu_);
  const bool news = cv_.wait_for(l, timeout, [&] { return !tokens_.empty() || finish_; });
  for (uint32_t t : tokens_) tokens->push_back(t);
  tokens_.clear();
  if (finish_) {
    *finish = std::move(finish_);
    finish_.reset();
  }
  return news;
}

void GenerationStream::Cancel() {
  std::lock_guard<std::mutex> l(mu_);
  cancelled_ = true;
}

bool GenerationStream::cancelled() const {
  std::lock_guard<std::mutex> l(mu_);
  return cancelled_;
}

}  // namespace lockstep::server
