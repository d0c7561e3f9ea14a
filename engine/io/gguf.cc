#include "engine/io/gguf.h"

#include <limits>

namespace lockstep {

std::string_view GgufTypeName(GgufType t) {
  switch (t) {
    case GgufType::kU8: return "u8";
    case GgufType::kI8: return "i8";
    case GgufType::kU16: return "u16";
    case GgufType::kI16: return "i16";
    case GgufType::kU32: return "u32";
    case GgufType::kI32: return "i32";
    case GgufType::kF32: return "f32";
    case GgufType::kBool: return "bool";
    case GgufType::kString: return "string";
    case GgufType::kArray: return "array";
    case GgufType::kU64: return "u64";
    case GgufType::kI64: return "i64";
    case GgufType::kF64: return "f64";
  }
  return "unknown";
}

bool IsGgufInteger(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kU16: case GgufType::kI16:
    case GgufType::kU32: case GgufType::kI32: case GgufType::kU64: case GgufType::kI64:
      return true;
    default:
      return false;
  }
}

namespace {

std::optional<int64_t> IntOf(GgufType t, uint64_t bits) {
  switch (t) {
    case GgufType::kU8: case GgufType::kU16: case GgufType::kU32:
      return static_cast<int64_t>(bits);
    case GgufType::kU64:
      if (bits > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
      return static_cast<int64_t>(bits);
    case GgufType::kI8: return static_cast<int8_t>(bits);
    case GgufType::kI16: return static_cast<int16_t>(bits);
    case GgufType::kI32: return static_cast<int32_t>(bits);
    case GgufType::kI64: return static_cast<int64_t>(bits);
    default: return std::nullopt;
  }
}

}  // namespace

std::optional<int64_t> GgufValue::Int() const { return IntOf(type, bits); }

std::optional<int64_t> GgufValue::IntAt(size_t i) const {
  if (type != GgufType::kArray || i >= numbers.size()) return std::nullopt;
  return IntOf(element_type, numbers[i]);
}

Result<GgufFile> GgufFile::Open(const std::string& path) {
  GgufFile f;
  LOCKSTEP_RETURN_IF_ERROR(f.OpenFile(path));
  LOCKSTEP_RETURN_IF_ERROR(f.Parse());
  return f;
}

Result<GgufFile> GgufFile::FromBuffer(std::vector<uint8_t> bytes, std::string name) {
  GgufFile f;
  f.TakeBuffer(std::move(bytes), std::move(name));
  LOCKSTEP_RETURN_IF_ERROR(f.Parse());
  return f;
}

const GgufValue* GgufFile::Find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::FindTensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

TensorInfo GgufFile::Info(const GgufTensor& t) {
  TensorInfo info{t.name, t.dtype, {}, t.offset, t.nbytes};
  for (auto d = t.ne.rbegin(); d != t.ne.rend(); ++d) info.shape.push_back(static_cast<int64_t>(*d));
  return info;
}

}  // namespace lockstep
