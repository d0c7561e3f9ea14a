#include "server/serve.h"

#include <algorithm>
#include <iostream>

#include "base/limits.h"
#include "coordinator/coordinator.h"
#include "engine/model_loader.h"
#include "engine/ops/dispatch.h"
#include "engine/ops/thread_pool.h"
#include "runtime/cluster_run.h"
#include "runtime/model_tokenizer.h"
#include "server/api.h"

namespace lockstep::server {
namespace {

std::string BaseName(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const size_t slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

// On a cluster every session and every prefix entry is a session on each
// worker: together they stay within the workers' limit on one
// coordinator's sessions, so the workers never refuse what the scheduler
// admitted (the scheduler answers 429 first).
SchedulerOptions ClusterOptions(const ServeOptions& o) {
  SchedulerOptions s = o.scheduler;
  const size_t limit = Limits{}.sessions_per_coordinator;
  s.prefix_sessions = s.prefix_budget_bytes == 0 ? 0 : std::min(s.prefix_sessions, limit / 2);
  if (s.max_sessions + s.prefix_sessions > limit) {
    s.max_sessions = limit - s.prefix_sessions;
    std::cerr << "lockstep serve: " << s.max_sessions << " sessions at once (and "
              << s.prefix_sessions << " prefix cache entries): the workers hold " << limit
              << " sessions of one coordinator\n";
  }
  return s;
}

// Serves the API over `backend` until SIGTERM/SIGINT.
Status Serve(const ServeOptions& o, const lockstep::ModelInfo& model, SchedulerBackend backend,
             std::string plan, std::vector<StageInfo> stages,
             std::vector<receipt::WorkerEntry> workers = {}) {
  std::optional<Tokenizer> tokenizer;
  if (model.files.has_tokenizer) {
    Result<Tokenizer> t = runtime::LoadModelTokenizer(model.files);
    if (t.ok()) {
      tokenizer = std::move(t).value();
    } else if (!model.files.gguf) {
      return t.status();
    } else {
      std::cerr << "lockstep serve: text disabled (token ids only): " << t.status().message() << "\n";
    }
  }
  ApiContext ctx;
  Result<ChatTemplate> chat = ChatTemplate::FromModel(model.files);
  if (chat.ok()) {
    ctx.model.chat_error.clear();
  } else {
    ctx.model.chat_error = chat.status().message();
    std::cerr << "lockstep serve: chat disabled: " << ctx.model.chat_error << "\n";
  }
  ctx.model.id = o.model_name.empty() ? BaseName(o.model_dir) : o.model_name;
  ctx.model.vocab = static_cast<uint32_t>(model.config.vocab_size);
  const Limits& limits = o.limits;
  ctx.model.max_positions = MaxPositions(limits, model.config.max_position_embeddings);
  ctx.model.max_prompt_tokens = limits.max_prompt_tokens;
  ctx.model.tokenizer = tokenizer ? &*tokenizer : nullptr;
  ctx.model.chat = chat.ok() ? &*chat : nullptr;
  ctx.eos = model.config.eos_token_ids;
  ctx.site = runtime::RunSite{model.Seed(), std::move(plan), std::move(workers)};
  ctx.stages = std::move(stages);
  ctx.cluster = backend.cluster;
  ctx.speculative_source = o.draft.stage != nullptr ? "draft-model" : "prompt-lookup";
  Metrics metrics;
  Scheduler scheduler(backend, ctx.site.seed, ctx.model.tokenizer, ctx.eos,
                      backend.cluster ? ClusterOptions(o) : o.scheduler, metrics, o.draft);
  ctx.scheduler = &scheduler;
  ctx.metrics = &metrics;
  Api api(std::move(ctx));
  return ServeHttp(
      o.http, api,
      [&](uint16_t port) {
        std::cout << "lockstep serve: listening on " << o.http.host << ":" << port << std::endl;
      },
      [&] { scheduler.Shutdown(std::chrono::milliseconds(o.shutdown_grace_ms)); });
}

Status ServeSharded(const ServeOptions& o) {
  ClusterConfig cfg = *o.cluster;
  cfg.model_dir = o.model_dir;
  LOCKSTEP_ASSIGN_OR_RETURN(lockstep::ModelInfo model, InspectModelDir(o.model_dir, cfg.pins));
  LOCKSTEP_ASSIGN_OR_RETURN(auto coordinator, Coordinator::Start(cfg, model));
  std::vector<StageInfo> stages;
  for (const WorkerInfo& w : coordinator->workers()) {
    stages.push_back(StageInfo{w.endpoint, w.spec.lo, w.spec.hi});
  }
  const Status st = Serve(o, model, SchedulerBackend{nullptr, coordinator.get()},
                          coordinator->plan_text(), std::move(stages),
                          runtime::ReceiptWorkers(*coordinator));
  coordinator->ShutdownWorkers("server stopped");
  return st;
}

}  // namespace

Status RunServer(const ServeOptions& o) {
  if (o.cluster) return ServeSharded(o);
  LOCKSTEP_ASSIGN_OR_RETURN(OpenModel model, OpenModelDir(o.model_dir, ModelPins{}));
  const StageSpec all{0, model.config.num_layers, true, true};
  LOCKSTEP_ASSIGN_OR_RETURN(
      LoadedStage stage,
      LoadStage(model, all, ComputeOptions{o.isa, o.threads, WeightFormat::kPackedBf16, o.weight_cache}));
  if (!stage.weight_cache_note.empty()) std::cerr << "lockstep serve: " << stage.weight_cache_note << "\n";
  return Serve(o, model, SchedulerBackend{stage.stage.get(), nullptr}, "",
               {StageInfo{"in-process", 0, model.config.num_layers}});
}

}  // namespace lockstep::server
