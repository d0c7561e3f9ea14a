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
// bytes a caller reads are ever copied into memory (TensorFile).
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
#include "engine/io/tensor_file.h"

namespace lockstep {

class SafetensorsFile : public TensorFile {
 public:
  SafetensorsFile(SafetensorsFile&&) noexcept = default;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

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

  // The named tensor as f32 (ReadTensorF32). NotFound if absent; Invalid
  // if its shape is not `expected_shape`; Unimplemented for a dtype other
  // than BF16, F16, F32.
  Result<std::vector<float>> ReadF32(
      std::string_view name, std::span<const int64_t> expected_shape) const;
  // Same, for a braced shape: ReadF32("model.norm.weight", {576}).
  Result<std::vector<float>> ReadF32(
      std::string_view name, std::initializer_list<int64_t> expected_shape) const {
    return ReadF32(name, std::span<const int64_t>(expected_shape.begin(),
                                                   expected_shape.size()));
  }

 private:
  SafetensorsFile() = default;

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

}  // namespace lockstep
