// ReadOnlyFile: one regular file opened for reading by offset (pread), never
// mapped, so a file truncated or rewritten by someone else while it is read
// yields an error naming the file instead of SIGBUS.
//
// Open refuses anything that is not a regular file with an error saying
// what the path is (a directory, a FIFO, a socket, a device); a FIFO is
// never opened for reading, so Open cannot block on one. The descriptor is
// kept for the object's life, so later reads see the file that was opened
// even if the path is renamed over. Changed() compares the file's size and
// modification time with what Open saw, to catch in-place rewrites.
//
// Move-only. ReadAt, Sha256 and Changed are const and may run on many
// threads at once (pread has no shared file position).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "base/sha256.h"
#include "base/status.h"

namespace lockstep {

class ReadOnlyFile {
 public:
  ReadOnlyFile() = default;
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ReadOnlyFile(ReadOnlyFile&& other) noexcept;
  ReadOnlyFile& operator=(ReadOnlyFile&& other) noexcept;

  // NotFound if the path does not exist; Io naming what the path is when it
  // is not a regular file, or naming the failing call.
  static Result<ReadOnlyFile> Open(const std::string& path);

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  // Fills `out` with the bytes at [offset, offset + out.size()). Corrupt
  // naming the path and `what` when the file now ends before that range
  // (truncated after it was opened); Io on a read error.
  Status ReadAt(uint64_t offset, std::span<uint8_t> out, const std::string& what) const;

  // SHA-256 of the whole file as opened (size() bytes), read through this
  // descriptor. Corrupt if it ends early.
  Result<Digest> Sha256() const;

  // Mismatch naming the path when the file's size or modification time
  // differs from what Open saw (it was rewritten in place).
  Status CheckUnchanged() const;

 private:
  void Reset();

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  int64_t mtime_sec_ = 0;
  int64_t mtime_nsec_ = 0;
};

// The whole of a small file an operator names (a config, a tokenizer file,
// a receipt, a chat template): opened as ReadOnlyFile::Open does (so a FIFO
// or device in its place is refused, never waited on), Invalid naming the
// path and `what` when it holds more than max_bytes, then read whole.
Result<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes,
                                  const std::string& what);

// The largest of each small file a model names, for ReadSmallFile (real
// ones: config.json a few KB, tokenizer.json a few MB, tokenizer_config.json
// tens of KB).
inline constexpr uint64_t kMaxConfigJsonBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxTokenizerFileBytes = uint64_t{1} << 30;
inline constexpr uint64_t kMaxTokenizerConfigBytes = uint64_t{16} << 20;

// What a path is, for error messages: "a directory", "a FIFO", "a socket",
// "a character device", "a block device", "a symbolic link", "missing",
// "a regular file".
std::string DescribePathKind(const std::string& path);

}  // namespace lockstep
