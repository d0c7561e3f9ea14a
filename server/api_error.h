// ApiError: one failed HTTP request in OpenAI's error shape
// {"error": {"message", "type", "param", "code"}}, with the HTTP status it
// is sent with (400 bad request or unknown model, 404 unknown route, 413 body too
// large, 429 over a capacity limit with Retry-After, 503 shutting down).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace lockstep::server {

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending request field, "" if none
  std::string code;   // a stable machine-readable kind, e.g. "context_length_exceeded"
  int retry_after_s = 0;  // > 0: sent as Retry-After

  nlohmann::json ToJson() const;
};

ApiError BadRequest(std::string message, std::string param = "", std::string code = "invalid_value");
ApiError Overloaded(std::string message, std::string code);  // 429, Retry-After: 1

}  // namespace lockstep::server
