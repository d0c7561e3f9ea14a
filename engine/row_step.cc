#include "engine/row_step.h"

#include <algorithm>
#include <string>

namespace lockstep {

Status CheckRows(std::span<const uint32_t> tokens, uint32_t rows) {
  if (rows == 0 || rows > tokens.size()) {
    return InvalidError("a multi-row step of " + std::to_string(tokens.size()) + " tokens cannot have " +
                        std::to_string(rows) + " step rows");
  }
  return Status::Ok();
}

Status StepBackend::FeedRows(std::span<const uint32_t> tokens, uint32_t rows,
                             const StepContext& ctx, RowSteps* out) {
  LOCKSTEP_RETURN_IF_ERROR(CheckRows(tokens, rows));
  out->steps.clear();
  out->traces.clear();
  const size_t first = tokens.size() - rows;
  StepContext c = ctx;
  for (uint32_t i = 0; i < rows; ++i) {
    c.step = ctx.step + i;
    const auto feed = i == 0 ? tokens.first(first + 1) : tokens.subspan(first + i, 1);
    LOCKSTEP_ASSIGN_OR_RETURN(const StepOutcome o, FeedAndChoose(feed, c));
    out->steps.push_back(o);
    if (const auto trace = StepTrace(); !trace.empty()) out->traces.emplace_back(trace.begin(), trace.end());
    if (first + i + 1 < tokens.size() && o.token != tokens[first + i + 1]) break;
  }
  return Status::Ok();
}

RowsChosen ChooseRows(std::span<const float> logits, size_t m, std::span<const uint32_t> next,
                      const StepContext& ctx, uint32_t first_step, std::vector<StepOutcome>* out,
                      ops::ThreadPool* pool, std::vector<Sha256State>* states) {
  const size_t vocab = logits.size() / m, base = out->size();
  auto row = [&](size_t i) { return logits.subspan(i * vocab, vocab); };
  RowsChosen r;
  if (ctx.sampling.temperature == 0.0f) {
    // §11.2 greedy: a row's token is its own logits' argmax, whatever the
    // rows before it chose, so every row is chosen at once on the pool and
    // the rows after the first differing one are dropped.
    out->resize(base + m);
    ops::ForEachChunk(pool, m, 1, [&](size_t b, size_t e, size_t) {
      for (size_t i = b; i < e; ++i) {
        (*out)[base + i].token = ChooseToken(row(i), ctx.sampling, first_step + static_cast<uint32_t>(i), nullptr);
      }
    });
    r.count = AcceptedRows(std::span<const StepOutcome>(*out).subspan(base), next);
    r.ended = r.count <= next.size() && (*out)[base + r.count - 1].token != next[r.count - 1];
    out->resize(base + r.count);
  } else {
    while (r.count < m && !r.ended) {  // §11.2, row by row: a step's choice decides the next
      const uint32_t token = ChooseToken(row(r.count), ctx.sampling,
                                         first_step + static_cast<uint32_t>(r.count), ctx.scratch);
      out->push_back({token, {}});
      r.ended = r.count < next.size() && token != next[r.count];
      ++r.count;
    }
  }
  // Item 0 folds the accepted rows into the chain in order (§12.1 item 7);
  // item i > 0 hashes row i-1's logits. Distinct outcomes per item.
  ops::ForEachChunk(pool, r.count + 1, 1, [&](size_t b, size_t e, size_t) {
    for (size_t item = b; item < e; ++item) {
      if (item == 0) {
        for (size_t i = 0; i < r.count; ++i) {
          ctx.chain->AddStep(row(i), (*out)[base + i].token);
          if (states != nullptr) states->push_back(ctx.chain->Export());
        }
      } else {
        (*out)[base + item - 1].logits_sha256 = LogitsSha256(row(item - 1));
      }
    }
  });
  return r;
}

size_t AcceptedRows(std::span<const StepOutcome> chosen, std::span<const uint32_t> next) {
  size_t k = 1;
  while (k < chosen.size() && (k > next.size() || chosen[k - 1].token == next[k - 1])) ++k;
  return k;
}

}  // namespace lockstep
