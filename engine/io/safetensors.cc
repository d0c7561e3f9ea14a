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

}  // namespace

uint32_t WidenF16Bits(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return sign | 0x7F800000u | (man << 13);  // inf, NaN
  if (exp != 0) return sign | ((exp + 112) << 23) | (man << 13);
  if (man == 0) return sign;  // +-0
  const int k = 31 - __builtin_clz(man);  // highest set bit, 0..9: man * 2^-24
  return sign | (static_cast<uint32_t>(k + 103) << 23) | ((man << (23 - k)) & 0x7FFFFFu);
}

void WidenToF32(DType dtype, std::span<const uint8_t> bytes, float* out) {
  if (dtype == DType::kF32) {
    if (!bytes.empty()) std::memcpy(out, bytes.data(), bytes.size());
    return;
  }
  const bool bf16 = dtype == DType::kBF16;
  for (size_t i = 0; i < bytes.size() / 2; ++i) {
    const uint16_t b = static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
    out[i] = std::bit_cast<float>(bf16 ? WidenBf16Bits(b) : WidenF16Bits(b));
  }
}

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(ReadOnlyFile rf, ReadOnlyFile::Open(path));
  SafetensorsFile file;
  file.path_ = path;
  file.file_ = std::move(rf);
  // The 8-byte length, then the header it announces when that is plausible;
  // ParseSafetensorsHeader words every implausible case.
  std::vector<uint8_t> head(std::min<uint64_t>(8, file.file_.size()));
  LOCKSTEP_RETURN_IF_ERROR(file.file_.ReadAt(0, head, "the header length"));
  if (head.size() == 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | head[static_cast<size_t>(i)];
    if (n <= kMaxSafetensorsHeader && n <= file.file_.size() - 8) {
      head.resize(8 + n);
      LOCKSTEP_RETURN_IF_ERROR(file.file_.ReadAt(
          8, std::span<uint8_t>(head.data() + 8, n), "the header"));
    }
  }
  LOCKSTEP_ASSIGN_OR_RETURN(file.tensors_,
                            ParseSafetensorsHeader(head, file.file_.size(), path));
  return file;
}

Result<SafetensorsFile> SafetensorsFile::FromBuffer(std::vector<uint8_t> bytes,
                                                    std::string name) {
  SafetensorsFile file;
  file.path_ = std::move(name);
  file.owned_ = std::move(bytes);
  file.in_memory_ = true;
  LOCKSTEP_ASSIGN_OR_RETURN(file.tensors_,
                            ParseSafetensorsHeader(file.owned_, file.owned_.size(), file.path_));
  return file;
}

uint64_t SafetensorsFile::size() const { return in_memory_ ? owned_.size() : file_.size(); }

Result<Digest> SafetensorsFile::Sha256() const {
  if (in_memory_) return lockstep::Sha256(std::span<const uint8_t>(owned_));
  return file_.Sha256();
}

Status SafetensorsFile::CheckUnchanged() const {
  return in_memory_ ? Status::Ok() : file_.CheckUnchanged();
}

Status SafetensorsFile::Read(const TensorInfo& t, uint64_t at, std::span<uint8_t> out) const {
  if (out.empty()) return Status::Ok();
  if (in_memory_) {
    std::memcpy(out.data(), owned_.data() + t.offset + at, out.size());
    return Status::Ok();
  }
  return file_.ReadAt(t.offset + at, out, "tensor \"" + t.name + "\"");
}

Status SafetensorsFile::ReadRange(uint64_t offset, std::span<uint8_t> out) const {
  if (out.empty()) return Status::Ok();
  if (in_memory_) {
    std::memcpy(out.data(), owned_.data() + offset, out.size());
    return Status::Ok();
  }
  return file_.ReadAt(offset, out, "its contents");
}

Result<std::vector<uint8_t>> SafetensorsFile::ReadBytes(const TensorInfo& t) const {
  std::vector<uint8_t> out(t.nbytes);
  LOCKSTEP_RETURN_IF_ERROR(Read(t, 0, out));
  return out;
}

const TensorInfo* SafetensorsFile::Find(std::string_view name) const {
  auto it = std::lower_bound(
      tensors_.begin(), tensors_.end(), name,
      [](const TensorInfo& t, std::string_view n) { return t.name < n; });
  if (it == tensors_.end() || it->name != name) return nullptr;
  return &*it;
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
  if (t->dtype != DType::kBF16 && t->dtype != DType::kF16 && t->dtype != DType::kF32) {
    return UnimplementedError(where + " has dtype " + std::string(DTypeName(t->dtype)) +
                              "; only BF16, F16 and F32 can be read as f32");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadBytes(*t));
  std::vector<float> out(bytes.size() / static_cast<size_t>(DTypeSize(t->dtype)));
  WidenToF32(t->dtype, bytes, out.data());
  return out;
}

}  // namespace lockstep
