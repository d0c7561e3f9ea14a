#include "engine/batch_stepper.h"

#include <algorithm>

#include "engine/local_backend.h"
#include "base/populate.h"

namespace lockstep {

void LocalBatchStepper::Reserve(size_t rows, size_t sessions, size_t keys) {
  stage_.ReserveScratch(scratch_, rows, keys);
  items_.reserve(sessions);
  fed_.reserve(sessions);
  choose_.reserve(sessions);
  rows_.reserve(sessions * stage_.hidden());
  logits_.reserve(sessions * stage_.vocab());
  choices_.reserve(sessions);
  outcomes_.reserve(sessions);
}

void LocalBatchStepper::Gather(std::span<DecodeSession* const> batch, size_t prompt_budget,
                               std::span<Status> status) {
  items_.clear();
  fed_.clear();
  for (size_t i = 0; i < batch.size(); ++i) {
    DecodeSession& s = *batch[i];
    auto* b = dynamic_cast<LocalBackend*>(&s.backend());
    if (b == nullptr || &b->stage() != &stage_) {
      status[i] = InvalidError("a batched step of a session that is not on this stage");
      continue;
    }
    const std::span<const uint32_t> tokens = s.NextTokens(&prompt_budget);
    if (tokens.empty()) continue;
    std::vector<float>& rows = b->batch_rows();
    if (status[i] = stage_.Embed(tokens, &rows); !status[i].ok()) continue;
    items_.push_back({rows, static_cast<int64_t>(b->cache().size()), &b->cache()});
    fed_.emplace_back(i, tokens.size());
  }
}

void LocalBatchStepper::ChooseAll(std::span<DecodeSession* const> batch,
                                  std::span<Status> status) {
  const size_t h = stage_.hidden(), vocab = stage_.vocab();
  choose_.clear();
  rows_.clear();
  for (size_t k = 0; k < fed_.size(); ++k) {
    const auto [i, n] = fed_[k];
    if (!batch[i]->Chooses(n)) {
      batch[i]->Fed(n);
      continue;
    }
    const float* last = items_[k].hidden.data() + (n - 1) * h;
    rows_.insert(rows_.end(), last, last + h);
    choose_.emplace_back(i, n);
  }
  if (choose_.empty()) return;
  ResizePopulated(logits_, choose_.size() * vocab);
  stage_.LogitsBatch(rows_, logits_, scratch_);
  outcomes_.resize(choose_.size());
  choices_.clear();
  for (size_t k = 0; k < choose_.size(); ++k) {
    const StepContext& ctx = batch[choose_[k].first]->Context();
    choices_.push_back({std::span<const float>(logits_).subspan(k * vocab, vocab), &ctx.sampling,
                        ctx.step, ctx.chain, ctx.scratch, &outcomes_[k]});
  }
  ChooseAndWitnessAll(choices_, stage_.pool());
  for (size_t k = 0; k < choose_.size(); ++k) {
    const auto [i, n] = choose_[k];
    status[i] = batch[i]->Chose(n, outcomes_[k]);
  }
}

size_t LocalBatchStepper::Step(std::span<DecodeSession* const> batch, size_t prompt_budget,
                               std::span<Status> status) {
  Gather(batch, prompt_budget, status);
  if (items_.empty()) return 0;
  if (Status st = stage_.ForwardBatch(items_, scratch_); !st.ok()) {
    for (const auto& [i, n] : fed_) status[i] = st;
    return fed_.size();
  }
  ChooseAll(batch, status);
  return fed_.size();
}

}  // namespace lockstep
