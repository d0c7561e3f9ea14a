// Multi-row steps: StepBackend::FeedRows runs several decode steps in one
// pass over the weights. Under CIS-2 each position is its own row
// (sequential reductions over its input, attention over the stored keys
// in order), so a row of an n-row pass has the same bits as the same
// token fed alone; FeedRows relies on it and the row-step tests prove it.
//
// Contract of FeedRows(tokens, rows, ctx, out): tokens t[0..n) are fed at
// positions CacheLength() .. CacheLength()+n-1; the rows of the last
// `rows` of them are decode steps ctx.step, ctx.step+1, ...: row i's
// logits give step ctx.step+i's token (ChooseToken at that step), its
// logits sha256 and its chain fold, exactly as a FeedAndChoose of that
// row's token would. Steps are accepted in order while each step's token
// equals the token fed after it; the first step whose token differs (or
// the last row) ends the call, and every row after it is evicted (a tail
// span: the same state as never feeding it). Afterwards the cache holds
// t[0 .. n-rows+k) for the k >= 1 steps returned, and the chain has folded
// exactly those k steps. So one operation serves teacher forcing (the
// tokens a receipt claims: all accepted unless the receipt differs) and
// speculative decoding (proposed tokens: the model's own choice decides).
//
// The default implementation (StepBackend's, in row_step.cc) is one
// FeedAndChoose per step, stopping at the first differing step, so every
// backend supports FeedRows; a backend that computes rows together
// (LocalBackend) overrides it.
//
// REQUIRES of callers: 1 <= rows <= tokens.size() (Invalid otherwise).
// Thread-compatible, as the backend.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "engine/decode.h"
#include "engine/ops/thread_pool.h"
#include "engine/step_outcome.h"

namespace lockstep {

struct RowSteps {
  std::vector<StepOutcome> steps;  // steps ctx.step .. ctx.step+k-1
  // Per step, a tracing backend's layer digests of the rows fed since the
  // step before (for the first step: every row up to and including its
  // own), as StepTrace would report for that step fed alone. Empty when
  // the backend does not trace.
  std::vector<std::vector<Digest>> traces;
};

// Invalid unless 1 <= rows <= tokens.size().
Status CheckRows(std::span<const uint32_t> tokens, uint32_t rows);

// The choosing half of a multi-row step, on `m` rows of logits
// ([m][vocab]): chooses row i's token as step first_step+i (ctx.sampling,
// ctx.scratch) and ends after the first row whose token differs from
// next[i] (next may be shorter than m: rows past its end are not
// compared). Greedy rows are chosen all at once on `pool` (a greedy
// token is its row's argmax alone), sampled ones in order. Folds the
// accepted rows into *ctx.chain in order and hashes their logits, the
// hashes on `pool`'s other threads (null: the caller).
// Appends the accepted outcomes to *out and, when `states` is not null,
// the chain's state after each accepted row to *states (a pipeline's last
// stage reports every row's state; its coordinator resumes from the last
// row it keeps).
struct RowsChosen {
  size_t count = 0;    // rows accepted (>= 1)
  bool ended = false;  // the last of them chose a token other than its next
};
RowsChosen ChooseRows(std::span<const float> logits, size_t m, std::span<const uint32_t> next,
                      const StepContext& ctx, uint32_t first_step, std::vector<StepOutcome>* out,
                      ops::ThreadPool* pool, std::vector<Sha256State>* states = nullptr);

// How many of a multi-row step's chosen tokens are accepted: steps are
// kept in order while each one's token equals the token fed after it
// (next[i]; rows past next's end are not compared), ending after the first
// that differs. REQUIRES !chosen.empty(); returns 1..chosen.size().
size_t AcceptedRows(std::span<const StepOutcome> chosen, std::span<const uint32_t> next);

}  // namespace lockstep
