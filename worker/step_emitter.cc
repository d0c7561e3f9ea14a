#include "worker/step_emitter.h"

#include "base/step_timeline.h"

namespace lockstep {

void StepEmitter::Configure(uint32_t stage_index, uint32_t layer_hi, size_t hidden,
                            ops::ThreadPool* pool) {
  stage_index_ = stage_index;
  layer_hi_ = layer_hi;
  hidden_ = hidden;
  pool_ = pool;
}

wire::Frame StepEmitter::TakeFrame() { return frame_pool_ ? frame_pool_->Take() : wire::Frame(); }

Outgoing& StepEmitter::Push(Outgoing::To to, const StepInput& in, uint32_t step,
                            std::vector<Outgoing>* out) {
  out->push_back(Outgoing{to, TakeFrame(), "", "", true, in.session_id, step});
  return out->back();
}

void StepEmitter::EmitHidden(const StepInput& in, std::span<const float> rows,
                             std::span<const Digest> digests, std::vector<Outgoing>* out) {
  wire::HiddenFrame& frame = out_hidden_;  // reused: its vectors keep their storage
  frame.session_id = in.session_id;
  frame.step = in.step;
  frame.first_position = in.first_pos;
  frame.seq = static_cast<uint32_t>(rows.size() / hidden_);
  frame.hidden = static_cast<uint32_t>(hidden_);
  frame.resume_layer = layer_hi_;
  frame.payload.assign(rows.begin(), rows.end());
  frame.handoff = in.handoff != nullptr ? *in.handoff : std::nullopt;
  frame.no_output = in.no_output;
  frame.step_rows = in.step_rows;
  frame.layer_digests.clear();
  if (in.session->trace) frame.layer_digests.assign(digests.begin(), digests.end());
  wire::MarshalHidden(frame, &Push(Outgoing::To::kNextStage, in, in.step, out).frame);
  timeline::Mark(timeline::Event::kComputeEnd, stage_index_, in.session_id, in.step);
}

Status StepEmitter::EmitOutcome(const StepInput& in, std::span<const float> logits,
                                std::span<const Digest> digests, std::vector<Outgoing>* out) {
  if (in.no_output) return Status::Ok();
  if (in.handoff != nullptr && in.handoff->has_value()) {
    const wire::ChainHandoff& h = **in.handoff;
    Result<WitnessChain> chain = WitnessChain::Resume(h.chain_state);
    LOCKSTEP_RETURN_IF_ERROR(chain.status());
    const StepOutcome o =
        ChooseAndWitness(logits, in.session->sampling, h.decode_step, &*chain, &sampling_, pool_);
    if (in.relay > 0) SendRelay(in, o, *chain, out);  // the next step first: it is awaited
    SendStepResult(in, o, *chain, digests, out);
    return Status::Ok();
  }
  std::vector<Digest> trace;
  if (in.session->trace) trace.assign(digests.begin(), digests.end());
  wire::Logits msg{in.session_id, in.step, static_cast<uint32_t>(logits.size()),
                   std::vector<float>(logits.begin(), logits.end()), std::move(trace)};
  out->push_back(Outgoing{Outgoing::To::kCoordinator, wire::MarshalMessage(msg), "", "", true,
                          in.session_id, in.step});
  timeline::Mark(timeline::Event::kComputeEnd, stage_index_, in.session_id, in.step);
  return Status::Ok();
}

void StepEmitter::SendStepResult(const StepInput& in, const StepOutcome& o,
                                 const WitnessChain& chain, std::span<const Digest> digests,
                                 std::vector<Outgoing>* out) {
  std::vector<Digest> trace;
  if (in.session->trace) trace.assign(digests.begin(), digests.end());
  const wire::StepResult r{in.session_id,   in.step,        o.token,
                           o.logits_sha256, chain.Export(), std::move(trace),
                           {}};
  wire::MarshalStepResult(r, &Push(Outgoing::To::kCoordinator, in, in.step, out).frame);
  timeline::Mark(timeline::Event::kComputeEnd, stage_index_, in.session_id, in.step);
}

void StepEmitter::SendRelay(const StepInput& in, const StepOutcome& o, const WitnessChain& chain,
                            std::vector<Outgoing>* out) {
  wire::TokenInput& next = out_relay_;  // reused: its token list keeps its storage
  next.phase = wire::TokenInput::Phase::kDecode;
  next.session_id = in.session_id;
  next.step = in.step + 1;
  next.first_position = in.first_pos + static_cast<uint32_t>(in.n);
  next.token_ids.assign(1, o.token);
  next.handoff = wire::ChainHandoff{(*in.handoff)->decode_step + 1, chain.Export(), in.relay - 1};
  next.no_output = false;
  next.relayed = true;
  wire::MarshalTokenInput(next, &Push(Outgoing::To::kFirstStage, in, next.step, out).frame);
}

void StepEmitter::EmitOutcomes(std::span<const StepInput> rows_in, std::span<const float> logits,
                               const std::function<void(const StepInput&, const Status&)>& fail,
                               std::vector<Outgoing>* out) {
  const size_t rows = rows_in.size(), v = rows == 0 ? 0 : logits.size() / rows;
  if (row_sampling_.size() < rows) row_sampling_.resize(rows);
  row_chains_.clear();
  row_chains_.resize(rows);
  row_outcomes_.assign(rows, StepOutcome{});
  row_choices_.clear();
  for (size_t i = 0; i < rows; ++i) {  // the rows whose token is chosen here
    const StepInput& in = rows_in[i];
    if (in.no_output || in.handoff == nullptr || !in.handoff->has_value()) continue;
    const wire::ChainHandoff& h = **in.handoff;
    Result<WitnessChain> chain = WitnessChain::Resume(h.chain_state);
    if (!chain.ok()) continue;  // EmitOutcome below reports it
    row_chains_[i].emplace(std::move(*chain));
    row_choices_.push_back({logits.subspan(i * v, v), &in.session->sampling, h.decode_step,
                            &*row_chains_[i], &row_sampling_[i], &row_outcomes_[i]});
  }
  ChooseAndWitnessAll(row_choices_, pool_);
  for (size_t i = 0; i < rows; ++i) {  // the next steps first: they are awaited
    if (row_chains_[i] && rows_in[i].relay > 0) {
      SendRelay(rows_in[i], row_outcomes_[i], *row_chains_[i], out);
    }
  }
  for (size_t i = 0; i < rows; ++i) {
    if (row_chains_[i]) {
      SendStepResult(rows_in[i], row_outcomes_[i], *row_chains_[i], {}, out);
      continue;
    }
    const Status st = EmitOutcome(rows_in[i], logits.subspan(i * v, v), {}, out);
    if (!st.ok()) fail(rows_in[i], st);
  }
}

void StepEmitter::EmitRowsResult(const StepInput& in, wire::StepResult r,
                                 std::vector<Outgoing>* out) {
  r.session_id = in.session_id;
  r.step = in.step;
  wire::MarshalStepResult(r, &Push(Outgoing::To::kCoordinator, in, in.step, out).frame);
  timeline::Mark(timeline::Event::kComputeEnd, stage_index_, in.session_id, in.step);
}

}  // namespace lockstep
