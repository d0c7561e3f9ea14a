// WeightCache: a stage's packed matrices (PackedMatrix's layout, each at
// the type it is resident as: f32, bf16, f16 or a GGUF block type at its
// own size, never widened) kept in a file, so a later load copies them from
// the page cache instead of packing them afresh from the checkpoint's bytes.
//
// Never trusted. A load still reads and hashes every checkpoint file (or
// GGUF part) it uses, and each cached matrix is compared with the packing
// of the bytes just hashed (PackedMatrix::SameAsRows, its padding rows with
// PaddingIsZero); on any difference the load packs afresh and rewrites the
// file. So the digests a receipt names are always those of the bytes the
// stage computes with.
//
// File (little-endian): "LSPACKv1", u32 version (2), u32 entry count, u64
// header bytes (the data start, a multiple of 4096); then per entry u16
// name length, the name, u8 type (WeightType's value: 0 f32, 1 bf16, 2 f16,
// 3 Q8_0, 4 Q4_0, 5 Q4_K, 6 Q5_K, 7 Q6_K), u64 rows, u64 cols, u64 offset,
// u64 bytes; each matrix's bytes at its offset (a multiple of 4096). Open
// checks every field against the file (the bytes exactly what
// PackedMatrix::BytesFor gives for the rows, cols and type) before anything
// is used: Corrupt naming the file and what is wrong.
//
// Never mapped: Open reads the whole file (pread, through ReadOnlyFile, so
// a FIFO or any other non-regular file is refused without blocking, and a
// file truncated while it is read is an error naming it) into memory this
// object owns, and the comparison above checks those owned bytes. So once
// a load is done nothing done to the file (rewritten in place, truncated,
// replaced) can reach the stage, and nothing can raise SIGBUS. The price is
// one copy of the stage's matrices out of the page cache into fresh memory
// (docs/performance.md, "Weight cache").
//
// A file is named by PathFor: the file format's version, the packed layout
// (ops::PackedLayoutTag: one for every ISA), the checkpoint files' identity
// (path, device, inode, size, modification time), the stage and the weight
// format, so a rewritten checkpoint, another stage or a build that packs
// otherwise gets another file. Files are replaced by rename, never
// rewritten in place.
//
// Move-only; Find is const and thread-safe. Views Find returns share the
// owned bytes, which live as long as the last of them.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "engine/io/checkpoint.h"
#include "engine/ops/packed_matrix.h"

namespace lockstep {

class WeightCache {
 public:
  // The cache file's path for the opened files of `checkpoint`, a stage
  // and a format tag, in `dir`. Io naming a checkpoint file it cannot stat.
  static Result<std::string> PathFor(const std::string& dir, const Checkpoint& checkpoint,
                                     std::string_view stage_and_format);

  // Reads the file into owned memory, from `threads` threads: NotFound when
  // there is none, Corrupt naming what is wrong with it (or that it ended
  // early), Io naming what it is when it is not a regular file, or the
  // failing call.
  static Result<WeightCache> Open(const std::string& path, int threads = 1);

  // Matrix `name` as a View into the owned bytes when the file holds it with
  // exactly these rows, cols and type.
  std::optional<ops::PackedMatrix> Find(std::string_view name, size_t rows, size_t cols,
                                        ops::WeightType type) const;
  size_t entries() const { return entries_.size(); }

  // Writes `matrices` (name, matrix) to `path` atomically (a temporary
  // file renamed over it), creating `path`'s directory if needed.
  static Status Write(const std::string& path,
                      const std::vector<std::pair<std::string, const ops::PackedMatrix*>>& matrices);

 private:
  struct Entry {
    uint64_t rows = 0, cols = 0, offset = 0;
    ops::WeightType type = ops::WeightType::kBf16;
  };
  std::shared_ptr<const uint8_t> bytes_;  // the whole file, as read by Open
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace lockstep
