#include "server/api_error.h"

namespace lockstep::server {

nlohmann::json ApiError::ToJson() const {
  nlohmann::json e = {{"message", message}, {"type", type}};
  e["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  e["code"] = code.empty() ? nlohmann::json(nullptr) : nlohmann::json(code);
  return {{"error", e}};
}

ApiError BadRequest(std::string message, std::string param, std::string code) {
  ApiError e;
  e.status = 400;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

ApiError Overloaded(std::string message, std::string code) {
  ApiError e;
  e.status = 429;
  e.type = "overloaded_error";
  e.message = std::move(message);
  e.code = std::move(code);
  e.retry_after_s = 1;
  return e;
}

}  // namespace lockstep::server
