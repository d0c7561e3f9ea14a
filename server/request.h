// Parsing OpenAI-shaped request bodies (/v1/completions and
// /v1/chat/completions) into a GenerationSpec plus response options.
// Every problem becomes a 400 ApiError naming the field: malformed JSON,
// wrong types, unknown model, empty prompt, token ids out of range,
// prompt + max_tokens beyond the model's context, n > 1, fields this
// server does not support. Stateless; thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>

#include "engine/tokenizer/tokenizer.h"
#include "server/api_error.h"
#include "server/chat_template.h"
#include "server/generation.h"

namespace lockstep::server {

struct ModelInfo {
  std::string id;                    // the name clients pass as "model"
  uint32_t vocab = 0;
  uint32_t max_positions = 0;        // MaxPositions(limits, max_position_embeddings)
  uint32_t max_prompt_tokens = 0;    // Limits::max_prompt_tokens
  const Tokenizer* tokenizer = nullptr;         // null: ids only
  const ChatTemplate* chat = nullptr;           // null: chat refused with chat_error
  std::string chat_error;
};

struct ParsedRequest {
  GenerationSpec spec;
  bool stream = false;
  bool echo = false;
  bool chat = false;
  bool seed_given = false;
  std::string prompt_text;  // echo: the prompt as text ("" for ids without a tokenizer)
};

// body: the raw request body. chat: which endpoint. fresh_seed: used when
// the request has no "seed".
std::variant<ParsedRequest, ApiError> ParseRequest(const std::string& body, bool chat,
                                                   const ModelInfo& model, uint64_t fresh_seed);

}  // namespace lockstep::server
