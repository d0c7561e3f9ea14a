// RemoteSession::FeedRows: multi-row steps computed together on the workers.
#include <algorithm>
#include <bit>

#include "coordinator/remote_session.h"
#include "engine/row_step.h"

namespace lockstep {

Status RemoteSession::FeedRows(std::span<const uint32_t> tokens, uint32_t rows,
                               const StepContext& ctx, RowSteps* out) {
  LOCKSTEP_RETURN_IF_ERROR(CheckRows(tokens, rows));
  if (link_.ship_logits() || rows == 1) return StepBackend::FeedRows(tokens, rows, ctx, out);
  if (std::bit_cast<uint32_t>(ctx.sampling.temperature) !=
          std::bit_cast<uint32_t>(sampling_.temperature) ||
      ctx.sampling.top_k != sampling_.top_k ||
      std::bit_cast<uint32_t>(ctx.sampling.top_p) != std::bit_cast<uint32_t>(sampling_.top_p) ||
      ctx.sampling.seed != sampling_.seed) {
    return InvalidError("session " + std::to_string(id()) +
                        ": a multi-row step asks for other sampling parameters than the session "
                        "was opened with (they are fixed at OpenSession)");
  }
  ahead_ = 0;  // the rows go together: nothing is relayed
  LOCKSTEP_RETURN_IF_ERROR(EndRelay());
  out->steps.clear();
  out->traces.clear();
  const size_t first = tokens.size() - rows;  // tokens[first + i] is step row i's
  StepContext c = ctx;
  bool ended = false;
  for (size_t at = 0, from = 0; at < rows && !ended;) {
    const size_t m = std::min<size_t>(kStepRowsPerRequest, rows - at);
    const size_t after = first + at + 1;  // the token fed after this request's first step row
    c.step = ctx.step + static_cast<uint32_t>(at);
    LOCKSTEP_RETURN_IF_ERROR(RowRequest(tokens.subspan(from, first + at + m - from),
                                        static_cast<uint32_t>(m),
                                        tokens.subspan(after, std::min(m, tokens.size() - after)),
                                        c, out, &ended));
    at += m;
    from = first + at;
  }
  return Status::Ok();
}

Status RemoteSession::RowRequest(std::span<const uint32_t> tokens, uint32_t rows,
                                 std::span<const uint32_t> next, const StepContext& ctx,
                                 RowSteps* out, bool* ended) {
  const std::string who = "session " + std::to_string(id());
  LOCKSTEP_ASSIGN_OR_RETURN(
      StepReply reply, Send(tokens, wire::ChainHandoff{ctx.step, ctx.chain->Export()}, 0,
                            static_cast<uint16_t>(rows)));
  auto* got = std::get_if<wire::StepResult>(&reply);
  if (got == nullptr) {
    return CorruptError(who + ": the last stage sent logits where a multi-row step's result "
                              "was asked for");
  }
  if (got->later_rows.size() + 1 != rows) {
    return CorruptError(who + ": the last stage sent " + std::to_string(got->later_rows.size() + 1) +
                        " step rows for a multi-row step of " + std::to_string(rows));
  }
  const size_t layers = static_cast<size_t>(link_.model_config().num_layers);
  const size_t per_row = open_.trace ? layers : 0;
  if (got->layer_digests.size() != per_row * rows) {
    return CorruptError(who + ": the last stage sent " + std::to_string(got->layer_digests.size()) +
                        " layer digests for " + std::to_string(rows) + " step rows, expected " +
                        std::to_string(per_row * rows));
  }
  std::vector<StepOutcome> chosen{{got->token, got->logits_sha256}};
  for (const wire::RowOutcome& r : got->later_rows) chosen.push_back({r.token, r.logits_sha256});
  for (const StepOutcome& o : chosen) LOCKSTEP_RETURN_IF_ERROR(CheckVocab("token", o.token));
  const size_t k = AcceptedRows(chosen, next);
  *ended = k - 1 < next.size() && chosen[k - 1].token != next[k - 1];
  const Sha256State& state = k == 1 ? got->chain_state : got->later_rows[k - 2].chain_state;
  LOCKSTEP_ASSIGN_OR_RETURN(*ctx.chain, WitnessChain::Resume(state));
  out->steps.insert(out->steps.end(), chosen.begin(), chosen.begin() + static_cast<ptrdiff_t>(k));
  for (size_t i = 0; i < k && per_row > 0; ++i) {
    const auto row = got->layer_digests.begin() + static_cast<ptrdiff_t>(i * per_row);
    out->traces.emplace_back(row, row + static_cast<ptrdiff_t>(per_row));
  }
  if (per_row > 0) trace_ = out->traces.back();
  // The rows after the last kept one: gone from every stage, as if never fed.
  if (k < rows) {
    const uint32_t dropped = rows - static_cast<uint32_t>(k);
    return Evict(history_.length() - dropped, dropped);
  }
  return Status::Ok();
}

}  // namespace lockstep
