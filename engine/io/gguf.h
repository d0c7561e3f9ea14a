// GGUF checkpoints (docs/gguf.md, EXTENSIONS.md E2.1): a read-only,
// validated view of one .gguf file — its metadata (key/value pairs) and its
// tensors — read by offset like a safetensors file (TensorFile: pread,
// never mapped, an in-memory copy for tests).
//
// GgufFile validates the whole header when it is opened, before anything
// sized by it is allocated; every failure is an error naming the file and
// the key, tensor or field (Corrupt for a malformed file, Unimplemented for
// a well-formed one this runtime does not compute: version 1, big-endian,
// a tensor type outside E2.3). Afterwards every tensor lies inside the
// data section, at a multiple of the alignment, sized exactly by its type
// and shape, and no two tensors overlap.
//
// Move-only; immutable after opening; const methods are thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "engine/io/dtype.h"
#include "engine/io/tensor_file.h"

namespace lockstep {

// Metadata value types (E2.1 vtype).
enum class GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};
// "u32", "string", ...
std::string_view GgufTypeName(GgufType t);
bool IsGgufInteger(GgufType t);

// One metadata value. Numbers and bools keep their little-endian bits.
struct GgufValue {
  GgufType type = GgufType::kU8;
  uint64_t bits = 0;             // a scalar number or bool, zero-extended
  std::string string;            // kString
  GgufType element_type = GgufType::kU8;  // kArray (never kArray: nesting is refused)
  std::vector<uint64_t> numbers;     // kArray of numbers or bools: each one's bits
  std::vector<std::string> strings;  // kArray of strings

  // An integer scalar (any integer vtype) as i64; nullopt for another type
  // or a u64 above INT64_MAX.
  std::optional<int64_t> Int() const;
  // Element i of an integer array as i64 (nullopt as for Int).
  std::optional<int64_t> IntAt(size_t i) const;
  size_t array_size() const { return element_type == GgufType::kString ? strings.size() : numbers.size(); }
};

// One tensor as the file describes it.
struct GgufTensor {
  std::string name;
  DType dtype;                // from its ggml type id (DTypeFromGgml)
  std::vector<uint64_t> ne;   // 1..4 dims, ne[0] contiguous; ne[0] % block elems == 0
  uint64_t offset = 0;        // absolute file offset of its first byte
  uint64_t nbytes = 0;        // ne[1]*...*ne[n-1] * DTypeRowBytes(dtype, ne[0])
};

// Limits checked before anything is allocated (far above real files:
// a 256k-token vocabulary, a thousand tensors, a header of a few MiB).
inline constexpr uint64_t kMaxGgufHeaderBytes = uint64_t{256} << 20;
inline constexpr uint64_t kMaxGgufKeys = uint64_t{1} << 16;
inline constexpr uint64_t kMaxGgufTensors = uint64_t{1} << 20;
inline constexpr uint64_t kMaxGgufArrayElements = uint64_t{1} << 22;
inline constexpr uint64_t kMaxGgufStringBytes = uint64_t{16} << 20;
inline constexpr uint64_t kMaxGgufKeyBytes = 65535;

class GgufFile : public TensorFile {
 public:
  GgufFile(GgufFile&&) noexcept = default;
  GgufFile& operator=(GgufFile&&) noexcept = default;

  // Opens `path` read-only and validates its header (see above).
  static Result<GgufFile> Open(const std::string& path);
  // Same validation over an in-memory copy; `name` stands in for the path.
  static Result<GgufFile> FromBuffer(std::vector<uint8_t> bytes, std::string name);

  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  // Where the data section starts: the header (and its padding) is
  // [0, data_start()).
  uint64_t data_start() const { return data_start_; }
  // SHA-256 of the header bytes [0, data_start()) as parsed, so a later
  // read of them can be compared with what the metadata was taken from.
  const Digest& header_sha256() const { return header_sha256_; }

  // nullptr when absent.
  const GgufValue* Find(std::string_view key) const;
  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  // Every tensor, in the order the file lists them.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // nullptr when absent.
  const GgufTensor* FindTensor(std::string_view name) const;

  // A tensor's bytes as a TensorInfo (its GGUF name, shape reversed).
  static TensorInfo Info(const GgufTensor& t);

  // Frees the metadata (a tokenizer's tokens and merges are most of a
  // header) once what is needed was read from it: Find finds nothing
  // after, tensors() are kept. Not thread-safe: call before sharing.
  void ReleaseMetadata() { std::map<std::string, GgufValue, std::less<>>().swap(metadata_); }

 private:
  friend class GgufHeaderParser;
  GgufFile() = default;
  Status Parse();

  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;
  Digest header_sha256_{};
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;  // name -> tensors_ index
};

}  // namespace lockstep
