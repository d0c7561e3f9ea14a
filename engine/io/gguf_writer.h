// GgufWriter: builds one GGUF v3 file (docs/gguf.md) — metadata in the
// order set, then tensor descriptions and data in the order added, each
// tensor at a multiple of the alignment (general.alignment when set as a
// u32, else 32), zero padding between. For synthetic checkpoints,
// conversions and tests.
//
// A tensor's bytes are given whole or produced row block by row block when
// the file is written (a multi-GB synthetic model is never held in
// memory). Write is atomic (atomic_file.h). A plain builder: not
// thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/io/dtype.h"
#include "engine/io/gguf.h"

namespace lockstep {

// Metadata values.
GgufValue GgufU32(uint32_t v);
GgufValue GgufI32(int32_t v);
GgufValue GgufF32(float v);
GgufValue GgufF64(double v);
GgufValue GgufBool(bool v);
GgufValue GgufString(std::string v);
GgufValue GgufStrings(std::vector<std::string> v);
GgufValue GgufI32s(const std::vector<int32_t>& v);

class GgufWriter {
 public:
  // Writes rows [first_row, first_row + n) of a tensor (each
  // DTypeRowBytes(dtype, ne[0]) bytes) into `out`, n = out.size() / row
  // bytes. Called in row order. An error abandons the file.
  using RowFill = std::function<Status(uint64_t first_row, std::span<uint8_t> out)>;

  // REQUIRES a key not set before (re-checked by Write, as Invalid).
  void Set(std::string key, GgufValue value);
  // REQUIRES: data.size() == the tensor's byte size (re-checked by Write).
  void AddTensor(std::string name, DType dtype, std::vector<uint64_t> ne,
                 std::vector<uint8_t> data);
  void AddTensor(std::string name, DType dtype, std::vector<uint64_t> ne, RowFill fill);
  // A 1-D F32 tensor of `values`.
  void AddF32Vector(std::string name, std::span<const float> values);

  // The whole file in memory (small files: tests).
  Result<std::vector<uint8_t>> Bytes() const;
  // Writes the file at `path` atomically. Io errors name the path.
  Status Write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<uint64_t> ne;
    std::vector<uint8_t> data;  // or empty with `fill`
    RowFill fill;
  };
  struct Placed {
    uint64_t offset = 0;  // in the data section
    uint64_t nbytes = 0;
  };
  // The header bytes (with their padding); `placed` receives each tensor's place.
  Result<std::vector<uint8_t>> Header(std::vector<Placed>& placed) const;
  Status Produce(const std::vector<Placed>& placed,
                 const std::function<Status(std::span<const uint8_t>)>& write) const;
  uint64_t Alignment() const;

  std::vector<std::pair<std::string, GgufValue>> keys_;
  std::vector<Entry> tensors_;
};

}  // namespace lockstep
