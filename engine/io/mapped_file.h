// MappedFile: a whole regular file mapped read-only (PROT_READ, MAP_PRIVATE).
//
// Move-only owner of the mapping; bytes() views it and is valid until the
// MappedFile is destroyed or moved from. An empty file maps to an empty
// span (no mmap call). Not thread-safe to move; reading bytes() from many
// threads is fine. If the file is truncated by someone else while mapped,
// reads past the new end raise SIGBUS: model files are expected immutable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/status.h"

namespace lockstep {

class MappedFile {
 public:
  MappedFile() = default;
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;

  // NotFound if the path does not exist; Io if it is not a regular file or
  // open/fstat/mmap fail. Messages name the path.
  static Result<MappedFile> Open(const std::string& path);

  std::span<const uint8_t> bytes() const {
    return {static_cast<const uint8_t*>(addr_), size_};
  }

 private:
  void Reset();

  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace lockstep
