#include "server/request.h"

#include <cmath>
#include <set>

#include "base/json.h"

namespace lockstep::server {
namespace {

using json = nlohmann::json;

struct Fail {
  ApiError e;
};

[[noreturn]] void Throw(std::string message, std::string param, std::string code = "invalid_value") {
  throw Fail{BadRequest(std::move(message), std::move(param), std::move(code))};
}

uint64_t GetUint(const json& j, const char* name, uint64_t max) {
  const json& v = j.at(name);
  if (!v.is_number_integer() || (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() < 0)) {
    Throw(std::string("'") + name + "' must be a non-negative integer", name, "invalid_type");
  }
  const uint64_t x = v.get<uint64_t>();
  if (x > max) Throw(std::string("'") + name + "' must be at most " + std::to_string(max), name);
  return x;
}

float GetFloat(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_number()) Throw(std::string("'") + name + "' must be a number", name, "invalid_type");
  const double d = v.get<double>();
  if (!std::isfinite(d)) Throw(std::string("'") + name + "' must be finite", name);
  return static_cast<float>(d);
}

bool GetBool(const json& j, const char* name) {
  const json& v = j.at(name);
  if (!v.is_boolean()) Throw(std::string("'") + name + "' must be true or false", name, "invalid_type");
  return v.get<bool>();
}

std::vector<uint32_t> IdsFrom(const json& arr, const ModelInfo& m) {
  std::vector<uint32_t> ids;
  for (const json& v : arr) {
    if (!v.is_number_unsigned()) Throw("'prompt' token ids must be non-negative integers", "prompt", "invalid_type");
    const uint64_t id = v.get<uint64_t>();
    if (id >= m.vocab) {
      Throw("'prompt' token id " + std::to_string(id) + " is outside the vocabulary (" +
                std::to_string(m.vocab) + " ids)",
            "prompt");
    }
    ids.push_back(static_cast<uint32_t>(id));
  }
  return ids;
}

std::vector<uint32_t> Encode(const std::string& text, const ModelInfo& m, const char* param) {
  if (m.tokenizer == nullptr) {
    Throw("the model folder has no tokenizer.json: give the prompt as token ids", param,
          "no_tokenizer");
  }
  return m.tokenizer->Encode(text);
}

void ParsePrompt(const json& j, const ModelInfo& m, ParsedRequest& r) {
  if (!j.contains("prompt")) Throw("'prompt' is required", "prompt", "missing_field");
  const json& p = j["prompt"];
  if (p.is_string()) {
    r.prompt_text = p.get<std::string>();
    r.spec.request.prompt = Encode(r.prompt_text, m, "prompt");
  } else if (p.is_array() && p.size() == 1 && p[0].is_string()) {
    r.prompt_text = p[0].get<std::string>();
    r.spec.request.prompt = Encode(r.prompt_text, m, "prompt");
  } else if (p.is_array() && !p.empty() && p[0].is_array()) {
    Throw("'prompt' holds several prompts; send one per request", "prompt", "unsupported_value");
  } else if (p.is_array() && !p.empty() && p[0].is_string()) {
    Throw("'prompt' holds several prompts; send one per request", "prompt", "unsupported_value");
  } else if (p.is_array()) {
    r.spec.request.prompt = IdsFrom(p, m);
    if (m.tokenizer != nullptr) r.prompt_text = m.tokenizer->Decode(r.spec.request.prompt);
  } else {
    Throw("'prompt' must be a string or an array of token ids", "prompt", "invalid_type");
  }
}

void ParseMessages(const json& j, const ModelInfo& m, ParsedRequest& r) {
  if (m.chat == nullptr) Throw("chat is unavailable for this model: " + m.chat_error, "messages", "no_chat_template");
  if (!j.contains("messages")) Throw("'messages' is required", "messages", "missing_field");
  const json& msgs = j["messages"];
  if (!msgs.is_array() || msgs.empty()) Throw("'messages' must be a non-empty array", "messages", "invalid_type");
  std::vector<ChatMessage> out;
  static const std::set<std::string> kRoles = {"system", "user", "assistant"};
  for (const json& msg : msgs) {
    if (!msg.is_object() || !msg.contains("role") || !msg["role"].is_string() ||
        !msg.contains("content") || !msg["content"].is_string()) {
      Throw("each message must be an object with string 'role' and 'content'", "messages", "invalid_type");
    }
    const std::string role = msg["role"].get<std::string>();
    if (kRoles.count(role) == 0) Throw("message role '" + role + "' is not system, user or assistant", "messages");
    for (const auto& [key, _] : msg.items()) {
      if (key != "role" && key != "content" && key != "name") {
        Throw("message field '" + key + "' is not supported", "messages", "unsupported_field");
      }
    }
    out.push_back({role, msg["content"].get<std::string>()});
  }
  if (m.tokenizer != nullptr) {
    if (Status st = ChatTemplate::CheckMessages(out, *m.tokenizer); !st.ok()) {
      Throw(st.message(), "messages", "special_token");
    }
  }
  r.prompt_text = m.chat->Render(out);
  r.spec.request.prompt = Encode(r.prompt_text, m, "messages");
}

void ParseStop(const json& v, ParsedRequest& r, const ModelInfo& m) {
  if (v.is_null()) return;
  if (v.is_string()) {
    r.spec.stop.push_back(v.get<std::string>());
  } else if (v.is_array() && v.size() <= 4) {
    for (const json& s : v) {
      if (!s.is_string()) Throw("'stop' must be a string or an array of up to 4 strings", "stop", "invalid_type");
      r.spec.stop.push_back(s.get<std::string>());
    }
  } else {
    Throw("'stop' must be a string or an array of up to 4 strings", "stop", "invalid_type");
  }
  for (const std::string& s : r.spec.stop) {
    if (s.empty()) Throw("'stop' strings must not be empty", "stop");
  }
  if (!r.spec.stop.empty() && m.tokenizer == nullptr) {
    Throw("'stop' needs a tokenizer.json in the model folder", "stop", "no_tokenizer");
  }
}

void ParseEvict(const json& v, ParsedRequest& r) {
  if (!v.is_array()) Throw("'evict' must be an array of \"FROM:COUNT@STEP\" strings", "evict", "invalid_type");
  for (const json& e : v) {
    if (!e.is_string()) Throw("'evict' must be an array of \"FROM:COUNT@STEP\" strings", "evict", "invalid_type");
    Result<EvictSpec> spec = ParseEvictSpec(e.get<std::string>());
    if (!spec.ok()) Throw("'evict': " + spec.status().message(), "evict");
    r.spec.request.evictions.push_back(*spec);
  }
}

// The one check of a decode request (ValidateDecodeRequest, as `run`
// applies it), its refusal named by the field at fault.
void CheckDecode(const DecodeRequest& req, const char* max_name) {
  const Status st = ValidateDecodeRequest(req);
  if (st.ok()) return;
  const std::string& msg = st.message();
  if (msg.rfind("limit max_positions", 0) == 0) Throw(msg, max_name, "context_length_exceeded");
  if (msg.rfind("--evict", 0) == 0) Throw(msg, "evict");
  if (msg.rfind("--window", 0) == 0) Throw(msg, "window");
  Throw(msg, msg.rfind("top_p", 0) == 0 ? "top_p" : "temperature");
}

ParsedRequest Parse(const std::string& body, bool chat, const ModelInfo& m, uint64_t fresh_seed) {
  Result<json> parsed = ParseJsonStrict(body, "the request body", ErrorKind::kInvalid);
  if (!parsed.ok()) Throw(parsed.status().message(), "", "invalid_json");
  const json& j = *parsed;
  if (!j.is_object()) Throw("the request body must be a JSON object", "", "invalid_json");
  static const std::set<std::string> kCommon = {
      "model", "max_tokens", "stream", "stop", "seed", "temperature", "top_k", "top_p",
      "n", "user", "window", "evict", "determinism_check", "max_completion_tokens",
      "speculative"};
  for (const auto& [key, _] : j.items()) {
    const bool own = chat ? key == "messages" : (key == "prompt" || key == "echo");
    if (kCommon.count(key) == 0 && !own) {
      Throw("'" + key + "' is not supported by this server", key, "unsupported_field");
    }
  }
  ParsedRequest r;
  r.chat = chat;
  if (j.contains("model")) {
    if (!j["model"].is_string()) Throw("'model' must be a string", "model", "invalid_type");
    if (j["model"].get<std::string>() != m.id) {
      Throw("model '" + j["model"].get<std::string>() + "' does not exist; this server serves '" +
                m.id + "'",
            "model", "model_not_found");
    }
  }
  if (j.contains("n") && GetUint(j, "n", UINT32_MAX) != 1) {
    Throw("'n' must be 1: this server returns one choice per request", "n", "unsupported_value");
  }
  if (chat) {
    ParseMessages(j, m, r);
  } else {
    ParsePrompt(j, m, r);
    if (j.contains("echo")) r.echo = GetBool(j, "echo");
  }
  if (r.spec.request.prompt.empty()) Throw("the prompt has no tokens", chat ? "messages" : "prompt", "empty_prompt");
  if (r.spec.request.prompt.size() > m.max_prompt_tokens) {
    Throw("max_prompt_tokens: the prompt has " + std::to_string(r.spec.request.prompt.size()) +
              " tokens, over the limit of " + std::to_string(m.max_prompt_tokens),
          chat ? "messages" : "prompt", "max_prompt_tokens");
  }
  const char* max_name = j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens";
  r.spec.request.gen = j.contains(max_name) ? static_cast<uint32_t>(GetUint(j, max_name, UINT32_MAX)) : 16;
  if (r.spec.request.gen == 0) Throw("'" + std::string(max_name) + "' must be at least 1", max_name);
  if (j.contains("stream")) r.stream = GetBool(j, "stream");
  if (j.contains("stop")) ParseStop(j["stop"], r, m);
  if (j.contains("temperature") && !j["temperature"].is_null()) r.spec.request.sampling.temperature = GetFloat(j, "temperature");
  if (j.contains("top_p") && !j["top_p"].is_null()) r.spec.request.sampling.top_p = GetFloat(j, "top_p");
  if (j.contains("top_k") && !j["top_k"].is_null()) r.spec.request.sampling.top_k = static_cast<uint32_t>(GetUint(j, "top_k", UINT32_MAX));
  if (j.contains("seed") && !j["seed"].is_null()) {
    r.spec.request.sampling.seed = GetUint(j, "seed", UINT64_MAX);
    r.seed_given = true;
  } else {
    r.spec.request.sampling.seed = fresh_seed;
  }
  if (j.contains("window") && !j["window"].is_null()) r.spec.request.window = static_cast<int>(GetUint(j, "window", INT32_MAX));
  if (j.contains("evict")) ParseEvict(j["evict"], r);
  r.spec.request.max_positions = m.max_positions;
  CheckDecode(r.spec.request, max_name);
  if (j.contains("determinism_check")) r.spec.determinism_check = GetBool(j, "determinism_check");
  if (j.contains("speculative")) r.spec.speculative = GetBool(j, "speculative");
  return r;
}

}  // namespace

std::variant<ParsedRequest, ApiError> ParseRequest(const std::string& body, bool chat,
                                                   const ModelInfo& model, uint64_t fresh_seed) {
  try {
    return Parse(body, chat, model, fresh_seed);
  } catch (const Fail& f) {
    return f.e;
  } catch (const nlohmann::json::exception& e) {
    return BadRequest(std::string("malformed request: ") + e.what(), "", "invalid_value");
  }
}

}  // namespace lockstep::server
