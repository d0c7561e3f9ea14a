#include "engine/io/safetensors_header.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include "base/json.h"

namespace lockstep {
namespace {

using nlohmann::json;

// Context for error messages: "<file>: tensor "<name>": <what>".
struct Where {
  const std::string& file;
  const std::string& tensor;
  Status Corrupt(const std::string& what) const {
    return CorruptError(file + ": tensor \"" + tensor + "\": " + what);
  }
};

Result<uint64_t> ReadHeaderLength(std::span<const uint8_t> head, uint64_t file_size,
                                  const std::string& name) {
  if (file_size < 8 || head.size() < 8) {
    return CorruptError(name + ": file is " + std::to_string(file_size) +
                        " bytes, shorter than the 8-byte header length");
  }
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | head[i];
  if (n > kMaxSafetensorsHeader) {
    return CorruptError(name + ": header length " + std::to_string(n) +
                        " exceeds the 100 MiB limit");
  }
  if (n > file_size - 8) {
    return CorruptError(name + ": header length " + std::to_string(n) +
                        " runs past the end of the " +
                        std::to_string(file_size) + "-byte file");
  }
  if (n > head.size() - 8) {
    return CorruptError(name + ": only " + std::to_string(head.size() - 8) + " of the " +
                        std::to_string(n) + " header bytes could be read");
  }
  return n;
}

Status CheckMetadata(const json& meta, const std::string& name) {
  if (!meta.is_object()) {
    return CorruptError(name + ": __metadata__ is a " +
                        std::string(JsonTypeName(meta)) + ", not an object");
  }
  for (const auto& [key, value] : meta.items()) {
    if (!value.is_string()) {
      return CorruptError(name + ": __metadata__ value of \"" + key +
                          "\" is not a string");
    }
  }
  return Status::Ok();
}

// A JSON integer in [0, INT64_MAX]; nullopt for anything else.
std::optional<uint64_t> NonNegativeInt(const json& j) {
  if (!j.is_number_unsigned()) return std::nullopt;
  uint64_t v = j.get<uint64_t>();
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return std::nullopt;
  }
  return v;
}

Status CheckEntryKeys(const json& entry, const Where& w) {
  if (!entry.is_object()) {
    return w.Corrupt(std::string("entry is a ") + JsonTypeName(entry) +
                     ", not an object");
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!entry.contains(key)) return w.Corrupt(std::string("missing ") + key);
  }
  for (const auto& [key, value] : entry.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      return w.Corrupt("unknown key \"" + key + "\"");
    }
  }
  return Status::Ok();
}

Result<DType> ParseEntryDType(const json& j, const Where& w) {
  if (!j.is_string()) return w.Corrupt("dtype is not a string");
  std::optional<DType> d = ParseDType(j.get<std::string>());
  if (!d) return w.Corrupt("unknown dtype \"" + j.get<std::string>() + "\"");
  return *d;
}

// Fills `shape`; returns the element count (overflow-checked).
Result<uint64_t> ParseEntryShape(const json& j, const Where& w,
                                 std::vector<int64_t>& shape) {
  if (!j.is_array()) return w.Corrupt("shape is not an array");
  uint64_t count = 1;
  for (const json& dim : j) {
    std::optional<uint64_t> d = NonNegativeInt(dim);
    if (!d) return w.Corrupt("shape has an entry that is not an integer >= 0");
    if (__builtin_mul_overflow(count, *d, &count)) {
      return w.Corrupt("shape's element count overflows 64 bits");
    }
    shape.push_back(static_cast<int64_t>(*d));
  }
  return count;
}

Result<uint64_t> ByteCount(uint64_t elements, DType dtype, const Where& w) {
  uint64_t bits = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(DTypeBits(dtype)),
                             &bits)) {
    return w.Corrupt("byte size overflows 64 bits");
  }
  if (bits % 8 != 0) {
    return w.Corrupt("element count times dtype bits is not whole bytes");
  }
  return bits / 8;
}

// Checks data_offsets against the data section; returns begin.
Result<uint64_t> ParseEntryOffsets(const json& j, uint64_t nbytes,
                                   uint64_t data_size, const Where& w) {
  if (!j.is_array() || j.size() != 2) {
    return w.Corrupt("data_offsets is not a [begin, end] pair");
  }
  std::optional<uint64_t> begin = NonNegativeInt(j[0]);
  std::optional<uint64_t> end = NonNegativeInt(j[1]);
  if (!begin || !end) return w.Corrupt("data_offsets are not integers >= 0");
  if (*begin > *end) return w.Corrupt("data_offsets begin > end");
  if (*end > data_size) {
    return w.Corrupt("data ends at " + std::to_string(*end) +
                     ", past the " + std::to_string(data_size) +
                     "-byte data section");
  }
  if (*end - *begin != nbytes) {
    return w.Corrupt("data_offsets span " + std::to_string(*end - *begin) +
                     " bytes but dtype and shape need " +
                     std::to_string(nbytes));
  }
  return *begin;
}

Result<TensorInfo> ParseEntry(const std::string& tensor, const json& entry,
                              uint64_t data_start, uint64_t data_size,
                              const std::string& file) {
  Where w{file, tensor};
  LOCKSTEP_RETURN_IF_ERROR(CheckEntryKeys(entry, w));
  TensorInfo t{tensor, DType::kU8, {}, 0, 0};
  LOCKSTEP_ASSIGN_OR_RETURN(t.dtype, ParseEntryDType(entry["dtype"], w));
  LOCKSTEP_ASSIGN_OR_RETURN(uint64_t elements,
                            ParseEntryShape(entry["shape"], w, t.shape));
  LOCKSTEP_ASSIGN_OR_RETURN(t.nbytes, ByteCount(elements, t.dtype, w));
  LOCKSTEP_ASSIGN_OR_RETURN(
      uint64_t begin,
      ParseEntryOffsets(entry["data_offsets"], t.nbytes, data_size, w));
  t.offset = data_start + begin;
  return t;
}

// Non-empty ranges must be pairwise disjoint.
Status CheckNoOverlap(std::vector<const TensorInfo*> by_offset,
                      const std::string& file) {
  std::erase_if(by_offset, [](const TensorInfo* t) { return t->nbytes == 0; });
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorInfo* a, const TensorInfo* b) {
              return a->offset < b->offset;
            });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const TensorInfo& prev = *by_offset[i - 1];
    if (by_offset[i]->offset < prev.offset + prev.nbytes) {
      return CorruptError(file + ": tensor \"" + by_offset[i]->name +
                          "\": data overlaps tensor \"" + prev.name + "\"");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<TensorInfo>> ParseSafetensorsHeader(
    std::span<const uint8_t> head, uint64_t file_size, const std::string& name) {
  LOCKSTEP_ASSIGN_OR_RETURN(uint64_t n, ReadHeaderLength(head, file_size, name));
  std::string_view text(reinterpret_cast<const char*>(head.data()) + 8, n);
  LOCKSTEP_ASSIGN_OR_RETURN(
      json header, ParseJsonStrict(text, name + ": header", ErrorKind::kCorrupt));
  if (!header.is_object()) {
    return CorruptError(name + ": header is a " +
                        std::string(JsonTypeName(header)) + ", not an object");
  }
  const uint64_t data_size = file_size - 8 - n;
  std::vector<TensorInfo> tensors;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      LOCKSTEP_RETURN_IF_ERROR(CheckMetadata(value, name));
      continue;
    }
    LOCKSTEP_ASSIGN_OR_RETURN(TensorInfo t,
                              ParseEntry(key, value, 8 + n, data_size, name));
    tensors.push_back(std::move(t));
  }
  std::vector<const TensorInfo*> ptrs;
  for (const TensorInfo& t : tensors) ptrs.push_back(&t);
  LOCKSTEP_RETURN_IF_ERROR(CheckNoOverlap(std::move(ptrs), name));
  std::sort(tensors.begin(), tensors.end(),
            [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
  return tensors;
}

}  // namespace lockstep
