#include "engine/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "engine/io/safetensors_header.h"

namespace lockstep {
namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors payloads are little-endian; F32 is copied as is");

std::string ShapeString(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

// §4.1: f32 bits = (u16 little-endian) << 16, element by element.
std::vector<float> WidenBf16(std::span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / 2);  // [elements]
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t b = static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
    out[i] = std::bit_cast<float>(WidenBf16Bits(b));
  }
  return out;
}

std::vector<float> CopyF32(std::span<const uint8_t> bytes) {
  std::vector<float> out(bytes.size() / 4);  // [elements]
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * 4);
  return out;
}

}  // namespace

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  SafetensorsFile file;
  file.path_ = path;
  file.map_ = std::move(map);
  return Validate(std::move(file));
}

Result<SafetensorsFile> SafetensorsFile::FromBuffer(std::vector<uint8_t> bytes,
                                                    std::string name) {
  SafetensorsFile file;
  file.path_ = std::move(name);
  file.owned_ = std::move(bytes);
  return Validate(std::move(file));
}

Result<SafetensorsFile> SafetensorsFile::Validate(SafetensorsFile file) {
  LOCKSTEP_ASSIGN_OR_RETURN(file.tensors_,
                            ParseSafetensorsHeader(file.AllBytes(), file.path_));
  return file;
}

std::span<const uint8_t> SafetensorsFile::AllBytes() const {
  if (!map_.bytes().empty()) return map_.bytes();
  return {owned_.data(), owned_.size()};
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
}

std::span<const uint8_t> SafetensorsFile::Bytes(const TensorInfo& t) const {
  return AllBytes().subspan(t.offset, t.nbytes);
}

Result<std::vector<float>> SafetensorsFile::ReadF32(
    std::string_view name, std::span<const int64_t> expected_shape) const {
  const TensorInfo* t = Find(name);
  std::string where = path_ + ": tensor \"" + std::string(name) + "\"";
  if (t == nullptr) return NotFoundError(where + " not found");
  if (!std::equal(t->shape.begin(), t->shape.end(), expected_shape.begin(),
                  expected_shape.end())) {
    return InvalidError(where + " has shape " + ShapeString(t->shape) +
                        ", expected " + ShapeString(expected_shape));
  }
  if (t->dtype == DType::kBF16) return WidenBf16(Bytes(*t));
  if (t->dtype == DType::kF32) return CopyF32(Bytes(*t));
  return UnimplementedError(where + " has dtype " +
                            std::string(DTypeName(t->dtype)) +
                            "; only BF16 and F32 can be read as f32");
}

}  // namespace lockstep
