#include "engine/io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace lockstep {
namespace {

Status WriteAll(int fd, std::span<const uint8_t> bytes, const std::string& path) {
  const uint8_t* p = bytes.data();
  size_t size = bytes.size();
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(path + ": write: " + std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status WriteFileAtomically(const std::string& path,
                           const std::vector<std::span<const uint8_t>>& parts) {
  return WriteFileAtomically(path, [&parts](const ByteSink& write) {
    for (std::span<const uint8_t> part : parts) LOCKSTEP_RETURN_IF_ERROR(write(part));
    return Status::Ok();
  });
}

Status WriteFileAtomically(const std::string& path,
                           const std::function<Status(const ByteSink& write)>& produce) {
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return IoError(path + ": cannot create temporary file: " + std::strerror(errno));
  Status st = produce([fd, &tmp](std::span<const uint8_t> bytes) { return WriteAll(fd, bytes, tmp); });
  if (st.ok() && ::fchmod(fd, 0644) != 0) st = IoError(tmp + ": fchmod: " + std::strerror(errno));
  if (::close(fd) != 0 && st.ok()) st = IoError(tmp + ": close: " + std::strerror(errno));
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = IoError(path + ": rename: " + std::strerror(errno));
  }
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

}  // namespace lockstep
