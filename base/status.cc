#include "base/status.h"

namespace lockstep {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kOk: return "OK";
    case ErrorKind::kInvalid: return "Invalid";
    case ErrorKind::kCorrupt: return "Corrupt";
    case ErrorKind::kMismatch: return "Mismatch";
    case ErrorKind::kNotFound: return "NotFound";
    case ErrorKind::kIo: return "IoError";
    case ErrorKind::kDisconnected: return "Disconnected";
    case ErrorKind::kTimeout: return "Timeout";
    case ErrorKind::kOverloaded: return "Overloaded";
    case ErrorKind::kUnimplemented: return "Unimplemented";
    case ErrorKind::kInternal: return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(ErrorKindName(kind_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(kind_, context + ": " + message_);
}

}  // namespace lockstep
