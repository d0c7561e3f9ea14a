// Status and Result<T>: how Lockstep reports errors that come from input,
// disk, network or configuration (bugs are asserts, not Statuses).
//
// A Status carries a Kind that tells the caller what to do about it (retry
// a Disconnected/Timeout/Overloaded peer; never retry Invalid/Corrupt/
// Mismatch input) and a message naming the file, field, peer or frame.
// Values are plain data: copyable, thread-compatible.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace lockstep {

enum class ErrorKind {
  kOk = 0,
  kInvalid,        // malformed request, bad config or argument
  kCorrupt,        // damaged file or frame (bad length, checksum, bounds)
  kMismatch,       // a pinned hash or digest differs from what was expected
  kNotFound,       // missing file, tensor, key
  kIo,             // the OS refused a read/write/mmap
  kDisconnected,   // a peer went away or cannot be reached
  kTimeout,        // a peer did not answer in time
  kOverloaded,     // a peer is alive but refused for lack of capacity
  kUnimplemented,  // a configured feature this build does not support
  kInternal,       // an invariant failed in a way we chose to report
};

const char* ErrorKindName(ErrorKind kind);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorKind kind, std::string message)
      : kind_(kind), message_(std::move(message)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return kind_ == ErrorKind::kOk; }
  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  // "Corrupt: model.safetensors: tensor x ends past end of file".
  std::string ToString() const;
  // Returns a copy whose message is "context: message".
  Status WithContext(const std::string& context) const;

 private:
  ErrorKind kind_ = ErrorKind::kOk;
  std::string message_;
};

inline Status InvalidError(std::string m) { return {ErrorKind::kInvalid, std::move(m)}; }
inline Status CorruptError(std::string m) { return {ErrorKind::kCorrupt, std::move(m)}; }
inline Status MismatchError(std::string m) { return {ErrorKind::kMismatch, std::move(m)}; }
inline Status NotFoundError(std::string m) { return {ErrorKind::kNotFound, std::move(m)}; }
inline Status IoError(std::string m) { return {ErrorKind::kIo, std::move(m)}; }
inline Status DisconnectedError(std::string m) { return {ErrorKind::kDisconnected, std::move(m)}; }
inline Status TimeoutError(std::string m) { return {ErrorKind::kTimeout, std::move(m)}; }
inline Status UnimplementedError(std::string m) { return {ErrorKind::kUnimplemented, std::move(m)}; }
inline Status InternalError(std::string m) { return {ErrorKind::kInternal, std::move(m)}; }

// Either a T or a non-ok Status.
// REQUIRES: value() only when ok(); status() is Ok when ok().
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : v_(std::move(status)) {  // NOLINT
    assert(!std::get<Status>(v_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  T& value() & { assert(ok()); return std::get<T>(v_); }
  const T& value() const& { assert(ok()); return std::get<T>(v_); }
  T&& value() && { assert(ok()); return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace lockstep

// Propagates a non-ok Status out of the enclosing function.
#define LOCKSTEP_RETURN_IF_ERROR(expr)             \
  do {                                             \
    ::lockstep::Status _st = (expr);               \
    if (!_st.ok()) return _st;                     \
  } while (0)

#define LOCKSTEP_CONCAT_INNER(a, b) a##b
#define LOCKSTEP_CONCAT(a, b) LOCKSTEP_CONCAT_INNER(a, b)
// `LOCKSTEP_ASSIGN_OR_RETURN(auto x, MakeX());` binds x or returns the error.
#define LOCKSTEP_ASSIGN_OR_RETURN(lhs, expr) \
  LOCKSTEP_ASSIGN_OR_RETURN_IMPL(LOCKSTEP_CONCAT(_res_, __LINE__), lhs, expr)
#define LOCKSTEP_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(tmp).value()
