// TensorFile: the bytes of one opened weight file — a safetensors file
// (safetensors.h) or a GGUF file (gguf.h) — and TensorInfo, where one of
// its tensors lies and how its elements are stored.
//
// Bytes are read by offset (ReadOnlyFile: pread, never mapped), so a file
// truncated after it was opened gives a Corrupt error naming it, never
// SIGBUS; or from an in-memory copy (FromBuffer of the derived readers),
// where `path` is only a name for messages. The readers validate their
// header before a TensorInfo is visible: every TensorInfo they give lies
// inside the file as opened.
//
// Move-only; immutable after opening; const methods are thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "engine/io/dtype.h"
#include "base/half_float.h"
#include "base/read_only_file.h"

namespace lockstep {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // [] is a scalar (one element); row-major, last dim contiguous
  uint64_t offset;             // absolute file offset of the first data byte
  uint64_t nbytes;             // product(shape) elements' bytes (DTypeRowBytes)
  // GGUF llama-arch q/k projections (EXTENSIONS.md E2.2): the rows (of a
  // 1-D bias: the elements) are stored in llama.cpp's permuted order and
  // this is the head count n of the un-permute (HfRowOf); 0: rows are in
  // the §2.5 order.
  int permuted_heads = 0;
};

// Rows of `t` as §2.5 lays them out: shape[0] (1 for a scalar).
uint64_t RowsOf(const TensorInfo& t);
// The §2.5 row that stored row `r` of `t` holds (r itself unless
// permuted_heads): with hd = rows / n, stored row h*hd + 2*i + s is row
// h*hd + s*(hd/2) + i. REQUIRES r < RowsOf(t).
uint64_t HfRowOf(const TensorInfo& t, uint64_t r);

class TensorFile {
 public:
  virtual ~TensorFile() = default;
  TensorFile(TensorFile&&) noexcept = default;
  TensorFile& operator=(TensorFile&&) noexcept = default;
  TensorFile(const TensorFile&) = delete;
  TensorFile& operator=(const TensorFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const;

  // Copies the file's bytes [offset, offset + out.size()). REQUIRES
  // offset + out.size() <= size(). Corrupt naming the file if it was
  // truncated.
  Status ReadRange(uint64_t offset, std::span<uint8_t> out) const;
  // Copies bytes [at, at + out.size()) of tensor `t`'s data. REQUIRES `t`
  // is one of this file's tensors, at + out.size() <= t.nbytes. Corrupt
  // naming the file and tensor if the file was truncated.
  Status Read(const TensorInfo& t, uint64_t at, std::span<uint8_t> out) const;
  // All of tensor `t`'s bytes (same REQUIRES and errors as Read).
  Result<std::vector<uint8_t>> ReadBytes(const TensorInfo& t) const;

  // SHA-256 of the whole file as opened, read through the same descriptor
  // the tensors are read from.
  Result<Digest> Sha256() const;
  // Mismatch if the file was rewritten in place since it was opened
  // (ReadOnlyFile::CheckUnchanged); Ok for an in-memory buffer.
  Status CheckUnchanged() const;

 protected:
  TensorFile() = default;
  // Opens `path` (NotFound/Io from the OS) / takes `bytes` named `name`.
  Status OpenFile(const std::string& path);
  void TakeBuffer(std::vector<uint8_t> bytes, std::string name);

 private:
  std::string path_;
  ReadOnlyFile file_;           // an opened file
  std::vector<uint8_t> owned_;  // an in-memory copy
  bool in_memory_ = false;
};

// Tensor `t` of `file` as f32 in §2.5 row order: BF16 widened by the exact
// §4.1 shift, F16 widened exactly, F32 copied bit for bit (WidenToF32),
// permuted rows moved back (HfRowOf). Invalid naming the file and tensor
// if its shape is not `expected_shape`; Unimplemented for any other dtype.
Result<std::vector<float>> ReadTensorF32(const TensorFile& file, const TensorInfo& t,
                                         std::span<const int64_t> expected_shape);

// Little-endian elements of `dtype` (BF16, F16 or F32) as f32 into
// out[0 .. bytes.size() / DTypeSize(dtype)): BF16 and F16 widened as above,
// F32 copied bit for bit. REQUIRES one of those three dtypes.
void WidenToF32(DType dtype, std::span<const uint8_t> bytes, float* out);

// "[2, 3]".
std::string ShapeString(std::span<const int64_t> shape);

}  // namespace lockstep
