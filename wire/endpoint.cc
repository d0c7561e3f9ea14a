#include "wire/endpoint.h"

#include <cstdint>

namespace lockstep::wire {
namespace {

bool StartsWith(const std::string& s, const char* prefix, std::string* rest) {
  const std::string p(prefix);
  if (s.compare(0, p.size(), p) != 0) return false;
  *rest = s.substr(p.size());
  return true;
}

Status CheckTcp(const std::string& endpoint, const std::string& address, EndpointUse use) {
  const auto bad = [&](const std::string& why) {
    return InvalidError("endpoint '" + endpoint + "': " + why);
  };
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) return bad("expected tcp://HOST:PORT");
  const std::string host = address.substr(0, colon);
  const std::string port = address.substr(colon + 1);
  if (host.empty()) return bad("the host is empty");
  if (host == "*" && use == EndpointUse::kConnect) return bad("cannot connect to host *");
  if (port == "*" || port == "0") {
    if (use == EndpointUse::kConnect) return bad("cannot connect to an ephemeral port");
    return Status::Ok();
  }
  if (port.empty() || port.size() > 5) return bad("port '" + port + "' is not 1..65535");
  uint32_t value = 0;
  for (char c : port) {
    if (c < '0' || c > '9') return bad("port '" + port + "' is not a decimal number");
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value < 1 || value > 65535) return bad("port " + port + " is out of range 1..65535");
  return Status::Ok();
}

}  // namespace

Status ValidateEndpoint(const std::string& endpoint, EndpointUse use) {
  std::string rest;
  if (StartsWith(endpoint, "tcp://", &rest)) return CheckTcp(endpoint, rest, use);
  if (StartsWith(endpoint, "ipc://", &rest) || StartsWith(endpoint, "inproc://", &rest)) {
    if (rest.empty()) return InvalidError("endpoint '" + endpoint + "': the name is empty");
    return Status::Ok();
  }
  return InvalidError("endpoint '" + endpoint +
                      "': expected tcp://HOST:PORT, ipc://PATH or inproc://NAME");
}

bool IsInprocEndpoint(const std::string& endpoint) {
  return endpoint.compare(0, 9, "inproc://") == 0;
}

}  // namespace lockstep::wire
