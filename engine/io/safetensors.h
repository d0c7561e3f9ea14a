// Safetensors checkpoints (docs/safetensors.md): a read-only, validated view
// of one file, and a writer that produces the same layout Hugging Face does.
//
// File layout: u64 little-endian N, N bytes of JSON header, data section.
// SafetensorsFile validates the whole header when it is opened (every
// failure is a Corrupt error naming the file and, where there is one, the
// tensor), so afterwards every TensorInfo's byte range is inside the data
// section and no two non-empty ranges overlap. Tensor bytes are read on
// demand by offset (ReadOnlyFile, never mapped): a file truncated after it
// was opened gives a Corrupt error naming it, never SIGBUS, and only the
// bytes a caller reads are ever copied into memory.
//
// SafetensorsFile is move-only and immutable after opening; its const
// methods are safe to call from many threads. SafetensorsWriter is a plain
// builder, not thread-safe.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/io/dtype.h"
#include "base/sha256.h"
#include "base/read_only_file.h"

namespace lockstep {

struct TensorInfo {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // [] is a scalar (one element)
  uint64_t offset;             // absolute file offset of the first data byte
  uint64_t nbytes;             // == product(shape) * DTypeBits(dtype) / 8
};

class SafetensorsFile {
 public:
  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  // Opens `path` read-only and validates its header. NotFound/Io from the
  // OS (naming what the path is when it is not a regular file), Corrupt from
  // validation.
  static Result<SafetensorsFile> Open(const std::string& path);
  // Same validation over an in-memory copy; `name` stands in for the path
  // in error messages.
  static Result<SafetensorsFile> FromBuffer(std::vector<uint8_t> bytes,
                                            std::string name);

  // nullptr when there is no tensor of that name.
  const TensorInfo* Find(std::string_view name) const;
  // Every tensor, sorted by name.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // Copies bytes [at, at + out.size()) of tensor `t`'s data into `out`.
  // REQUIRES: `t` is one of tensors() of this file, at + out.size() <=
  // t.nbytes. Corrupt naming the file and tensor if the file was truncated.
  Status Read(const TensorInfo& t, uint64_t at, std::span<uint8_t> out) const;
  // Copies the file's bytes [offset, offset + out.size()) (any part: the
  // header, tensors, the gaps between). REQUIRES offset + out.size() <=
  // size(). Corrupt naming the file if it was truncated.
  Status ReadRange(uint64_t offset, std::span<uint8_t> out) const;
  // All of tensor `t`'s bytes (same REQUIRES and errors as Read).
  Result<std::vector<uint8_t>> ReadBytes(const TensorInfo& t) const;

  // The named tensor as f32: BF16 widened by the exact §4.1 shift, F16
  // widened exactly (every binary16 value is an f32), F32 copied bit for
  // bit. NotFound if absent; Invalid if its shape is not `expected_shape`;
  // Unimplemented for any other dtype.
  Result<std::vector<float>> ReadF32(
      std::string_view name, std::span<const int64_t> expected_shape) const;
  // Same, for a braced shape: ReadF32("model.norm.weight", {576}).
  Result<std::vector<float>> ReadF32(
      std::string_view name, std::initializer_list<int64_t> expected_shape) const {
    return ReadF32(name, std::span<const int64_t>(expected_shape.begin(),
                                                   expected_shape.size()));
  }

  const std::string& path() const { return path_; }
  uint64_t size() const;

  // SHA-256 of the whole file as opened, read through the same descriptor
  // the tensors are read from.
  Result<Digest> Sha256() const;
  // Mismatch if the file was rewritten in place since it was opened
  // (ReadOnlyFile::CheckUnchanged); Ok for an in-memory buffer.
  Status CheckUnchanged() const;

 private:
  SafetensorsFile() = default;

  std::string path_;
  ReadOnlyFile file_;           // used by Open
  std::vector<uint8_t> owned_;  // used by FromBuffer
  bool in_memory_ = false;
  std::vector<TensorInfo> tensors_;
};

// Collects tensors and writes them as one safetensors file: header
// {"__metadata__":{"format":"pt"}, name: {dtype, shape, data_offsets}...},
// tensors sorted by name and packed contiguously in that order, header
// padded with spaces so the data section starts 8-byte aligned.
class SafetensorsWriter {
 public:
  // REQUIRES: data.size() == product(shape) * DTypeBits(dtype) / 8 and a
  // name not added before (both re-checked by WriteFile, as Invalid).
  void Add(std::string name, DType dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> data);

  // Writes to a temporary file beside `path`, then renames it into place,
  // so `path` is either absent/old or complete. Io errors name the path.
  Status WriteFile(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  Result<std::string> Header() const;
  std::vector<const Entry*> Sorted() const;

  std::vector<Entry> entries_;
};

// Widens one bf16 bit pattern to f32 exactly (§4.1): bits << 16.
inline uint32_t WidenBf16Bits(uint16_t b) { return static_cast<uint32_t>(b) << 16; }

// Widens one IEEE binary16 bit pattern to the f32 of the same value (exact:
// subnormals become normal f32s, infinities and NaN payloads are kept).
uint32_t WidenF16Bits(uint16_t h);

// Little-endian elements of `dtype` (BF16, F16 or F32) as f32 into
// out[0 .. bytes.size() / DTypeSize(dtype)): BF16 and F16 widened as above,
// F32 copied bit for bit. REQUIRES one of those three dtypes.
void WidenToF32(DType dtype, std::span<const uint8_t> bytes, float* out);

}  // namespace lockstep
