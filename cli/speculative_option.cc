#include "cli/speculative_option.h"

#include <chrono>
#include <cstdio>

#include "base/limits.h"
#include "engine/draft_proposals.h"

namespace lockstep::cli {
namespace {

// Forwards to `inner`, adding the wall time of each call to *ms.
class TimedProposals final : public ProposalSource {
 public:
  TimedProposals(std::unique_ptr<ProposalSource> inner, double* ms) : inner_(std::move(inner)), ms_(ms) {}
  Status Propose(std::span<const uint32_t> history, size_t max_tokens,
                 std::vector<uint32_t>* out) override {
    const auto start = std::chrono::steady_clock::now();
    Status st = inner_->Propose(history, max_tokens, out);
    *ms_ += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return st;
  }

 private:
  std::unique_ptr<ProposalSource> inner_;
  double* ms_;
};

}  // namespace

void AddSpeculativeFlags(CLI::App* cmd, bool* on, std::string* draft) {
  cmd->add_flag("--speculative", *on,
                "Exact speculative decoding: prompt-lookup proposals checked several per pass "
                "(the same tokens, digests and receipt; options.speculative says so)");
  cmd->add_option("--draft-model", *draft,
                  "Speculative decoding with proposals from this smaller model's greedy decode "
                  "(a folder or .gguf with the same tokenizer; implies --speculative)")
      ->each([on](const std::string&) { *on = true; });
}

TokenizerIdentity TargetTokenizer(const ModelInfo& model) {
  return TokenizerIdentityOf(model.files, model.config, model.hashes.tokenizer);
}

Result<std::unique_ptr<DraftModel>> LoadDraftModel(const std::string& path,
                                                   const TokenizerIdentity& target,
                                                   const ComputeOptions& compute) {
  if (path.empty()) return std::unique_ptr<DraftModel>();
  const std::string what = "--draft-model " + path;
  Result<OpenModel> open = OpenModelDir(path, ModelPins{});
  if (!open.ok()) return open.status().WithContext(what);
  auto draft = std::make_unique<DraftModel>();
  draft->model = std::move(open).value();
  const ModelInfo& info = draft->model;
  LOCKSTEP_RETURN_IF_ERROR(CheckSameTokenizer(
      target, TokenizerIdentityOf(info.files, info.config, info.hashes.tokenizer)));
  const StageSpec all{0, info.config.num_layers, true, true};
  Result<LoadedStage> stage = LoadStage(draft->model, all, compute);
  if (!stage.ok()) return stage.status().WithContext(what);
  draft->stage = std::move(stage).value();
  draft->max_positions = MaxPositions(Limits{}, info.config.max_position_embeddings);
  return draft;
}

runtime::Decoder DecoderFor(bool on, SpeculativeStats* stats, DraftModel* draft) {
  if (!on) return {};
  return [stats, draft](StepBackend& backend, const DecodeRequest& req, const WitnessSeed& seed) {
    *stats = {};
    const SpeculativeOptions o{};
    std::unique_ptr<ProposalSource> source;
    if (draft != nullptr) {
      draft->proposing_ms = 0;
      source = std::make_unique<TimedProposals>(
          std::make_unique<DraftProposals>(*draft->stage, draft->max_positions,
                                           req.prompt.size() + req.gen + o.max_proposals),
          &draft->proposing_ms);
    }
    return RunSpeculativeDecode(backend, req, seed, o, stats, std::move(source));
  };
}

std::string SpeculativeSource(bool on, const DraftModel* draft) {
  if (!on) return "";
  return draft != nullptr ? "draft-model" : "prompt-lookup";
}

std::string SpeculativeNote(const SpeculativeStats& s, const DraftModel* draft) {
  char buf[320];
  std::snprintf(buf, sizeof buf,
                "speculative           = %llu of %llu proposed tokens kept (%.1f%%), %llu multi-row steps",
                static_cast<unsigned long long>(s.accepted), static_cast<unsigned long long>(s.proposed),
                s.proposed ? 100.0 * static_cast<double>(s.accepted) / static_cast<double>(s.proposed) : 0.0,
                static_cast<unsigned long long>(s.passes));
  std::string note = buf;
  if (draft != nullptr) {
    std::snprintf(buf, sizeof buf,
                  "\ndraft_model_ms        = %.3f (proposing, in all; not in decode_ms_per_token)",
                  draft->proposing_ms);
    note += buf;
  }
  return note;
}

}  // namespace lockstep::cli
