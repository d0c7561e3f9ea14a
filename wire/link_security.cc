#include "wire/link_security.h"

#include <array>
#include <cstdint>

#include <zmq.h>

namespace lockstep::wire {

Status ValidateCurveKey(std::string_view key, const std::string& what) {
  if (key.size() != 40) {
    return InvalidError(what + " must be a 40-character Z85 CURVE key, got " +
                        std::to_string(key.size()) + " characters");
  }
  const std::string copy(key);
  std::array<uint8_t, 32> raw{};
  if (zmq_z85_decode(raw.data(), copy.c_str()) == nullptr) {
    return InvalidError(what + " is not valid Z85 text");
  }
  return Status::Ok();
}

Result<CurveKeyPair> GenerateCurveKeyPair() {
  std::array<char, 41> pub{}, sec{};
  if (zmq_curve_keypair(pub.data(), sec.data()) != 0) {
    return IoError(std::string("cannot generate a CURVE key pair: ") + zmq_strerror(zmq_errno()));
  }
  return CurveKeyPair{std::string(pub.data(), 40), std::string(sec.data(), 40)};
}

std::string KeyLabel(std::string_view public_z85) {
  return std::string(public_z85.substr(0, 8)) + "\xe2\x80\xa6";
}

}  // namespace lockstep::wire
