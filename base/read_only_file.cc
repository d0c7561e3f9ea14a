#include "base/read_only_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "base/populate.h"

namespace lockstep {
namespace {

Status OsError(const std::string& what, const std::string& path, int err) {
  std::string msg = path + ": " + what + ": " + std::strerror(err);
  if (err == ENOENT) return NotFoundError(msg);
  return IoError(msg);
}

const char* KindOf(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace

Result<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes,
                                  const std::string& what) {
  LOCKSTEP_ASSIGN_OR_RETURN(ReadOnlyFile f, ReadOnlyFile::Open(path));
  if (f.size() > max_bytes) {
    return InvalidError(path + ": " + std::to_string(f.size()) + " bytes is over the limit of " +
                        std::to_string(max_bytes) + " for " + what);
  }
  std::string text(static_cast<size_t>(f.size()), '\0');
  LOCKSTEP_RETURN_IF_ERROR(
      f.ReadAt(0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(text.data()), text.size()), what));
  return text;
}

std::string DescribePathKind(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? "missing" : std::string("unreadable (") + std::strerror(errno) + ")";
  }
  return KindOf(st.st_mode);
}

ReadOnlyFile::~ReadOnlyFile() { Reset(); }

ReadOnlyFile::ReadOnlyFile(ReadOnlyFile&& o) noexcept
    : path_(std::move(o.path_)),
      fd_(std::exchange(o.fd_, -1)),
      size_(o.size_),
      mtime_sec_(o.mtime_sec_),
      mtime_nsec_(o.mtime_nsec_) {}

ReadOnlyFile& ReadOnlyFile::operator=(ReadOnlyFile&& o) noexcept {
  if (this != &o) {
    Reset();
    path_ = std::move(o.path_);
    fd_ = std::exchange(o.fd_, -1);
    size_ = o.size_;
    mtime_sec_ = o.mtime_sec_;
    mtime_nsec_ = o.mtime_nsec_;
  }
  return *this;
}

void ReadOnlyFile::Reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<ReadOnlyFile> ReadOnlyFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the fstat below
  // refuses it before any read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return NotFoundError(path + ": not found");
    return OsError("open (" + DescribePathKind(path) + ")", path, err);
  }
  ReadOnlyFile f;
  f.fd_ = fd;
  f.path_ = path;
  struct stat st;
  if (::fstat(fd, &st) != 0) return OsError("fstat", path, errno);
  if (!S_ISREG(st.st_mode)) {
    return IoError(path + ": is " + KindOf(st.st_mode) + ", not a regular file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  f.size_ = static_cast<uint64_t>(st.st_size);
  f.mtime_sec_ = st.st_mtim.tv_sec;
  f.mtime_nsec_ = st.st_mtim.tv_nsec;
  return f;
}

Status ReadOnlyFile::ReadAt(uint64_t offset, std::span<uint8_t> out,
                            const std::string& what) const {
  size_t done = 0;
  while (done < out.size()) {
    const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done,
                              static_cast<off_t>(offset + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      return OsError("read of " + what, path_, errno);
    }
    if (n == 0) {
      return CorruptError(path_ + ": file ends at byte " + std::to_string(offset + done) +
                          " while reading " + what + " (bytes " + std::to_string(offset) +
                          ".." + std::to_string(offset + out.size()) + " of the " +
                          std::to_string(size_) +
                          " it had when opened): truncated while in use?");
    }
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

Result<Digest> ReadOnlyFile::Sha256() const {
  Sha256Stream s;
  // No larger than the file (a config of a few hundred bytes zeroed 4 MB),
  // its pages populated at once, not faulted in one by one (base/populate.h).
  const size_t size = static_cast<size_t>(std::clamp<uint64_t>(size_, 1, size_t{4} << 20));
  const std::unique_ptr<uint8_t[]> buf(new uint8_t[size]);
  PopulateForWrite(buf.get(), size);
  for (uint64_t at = 0; at < size_;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size, size_ - at));
    LOCKSTEP_RETURN_IF_ERROR(ReadAt(at, std::span<uint8_t>(buf.get(), n), "its contents"));
    s.Update(std::span<const uint8_t>(buf.get(), n));
    at += n;
  }
  return s.Finalize();
}

Status ReadOnlyFile::CheckUnchanged() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return OsError("fstat", path_, errno);
  if (static_cast<uint64_t>(st.st_size) != size_ || st.st_mtim.tv_sec != mtime_sec_ ||
      st.st_mtim.tv_nsec != mtime_nsec_) {
    return MismatchError(path_ + ": changed while it was being loaded (size " +
                         std::to_string(size_) + " -> " + std::to_string(st.st_size) +
                         ", or its modification time moved)");
  }
  return Status::Ok();
}

}  // namespace lockstep
