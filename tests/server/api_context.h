// Test helper: the ApiContext `serve` builds (server/serve.cc), for a model
// of `config` with the default limits, over a scheduler and its metrics
// that outlive the Api built from it.
#pragma once

#include <utility>

#include "base/limits.h"
#include "server/api.h"

namespace lockstep::testing {

inline server::ApiContext TestApiContext(const ModelConfig& config, runtime::RunSite site,
                                         server::Scheduler& scheduler, server::Metrics& metrics,
                                         const Tokenizer* tokenizer = nullptr,
                                         Coordinator* cluster = nullptr) {
  server::ApiContext ctx;
  ctx.model.id = "m";
  ctx.model.vocab = static_cast<uint32_t>(config.vocab_size);
  ctx.model.max_positions = MaxPositions(Limits{}, config.max_position_embeddings);
  ctx.model.max_prompt_tokens = Limits{}.max_prompt_tokens;
  ctx.model.tokenizer = tokenizer;
  ctx.eos = config.eos_token_ids;
  ctx.site = std::move(site);
  ctx.cluster = cluster;
  ctx.scheduler = &scheduler;
  ctx.metrics = &metrics;
  return ctx;
}

}  // namespace lockstep::testing
