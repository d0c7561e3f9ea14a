#include "engine/io/tensor_file.h"

#include <algorithm>
#include <bit>
#include <cstring>

namespace lockstep {

static_assert(std::endian::native == std::endian::little,
              "weight files are little-endian; F32 is copied as is");

uint64_t RowsOf(const TensorInfo& t) {
  return t.shape.empty() ? 1 : static_cast<uint64_t>(t.shape[0]);
}

uint64_t HfRowOf(const TensorInfo& t, uint64_t r) {
  if (t.permuted_heads <= 0) return r;
  const uint64_t hd = RowsOf(t) / static_cast<uint64_t>(t.permuted_heads);
  const uint64_t h = r / hd, within = r % hd;
  return h * hd + (within % 2) * (hd / 2) + within / 2;
}

uint64_t TensorFile::size() const { return in_memory_ ? owned_.size() : file_.size(); }

Status TensorFile::OpenFile(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(file_, ReadOnlyFile::Open(path));
  path_ = path;
  in_memory_ = false;
  return Status::Ok();
}

void TensorFile::TakeBuffer(std::vector<uint8_t> bytes, std::string name) {
  owned_ = std::move(bytes);
  path_ = std::move(name);
  in_memory_ = true;
}

Status TensorFile::ReadRange(uint64_t offset, std::span<uint8_t> out) const {
  if (out.empty()) return Status::Ok();
  if (in_memory_) {
    std::memcpy(out.data(), owned_.data() + offset, out.size());
    return Status::Ok();
  }
  return file_.ReadAt(offset, out, "its contents");
}

Status TensorFile::Read(const TensorInfo& t, uint64_t at, std::span<uint8_t> out) const {
  if (out.empty()) return Status::Ok();
  if (in_memory_) {
    std::memcpy(out.data(), owned_.data() + t.offset + at, out.size());
    return Status::Ok();
  }
  return file_.ReadAt(t.offset + at, out, "tensor \"" + t.name + "\"");
}

Result<std::vector<uint8_t>> TensorFile::ReadBytes(const TensorInfo& t) const {
  std::vector<uint8_t> out(t.nbytes);
  LOCKSTEP_RETURN_IF_ERROR(Read(t, 0, out));
  return out;
}

Result<Digest> TensorFile::Sha256() const {
  if (in_memory_) return lockstep::Sha256(std::span<const uint8_t>(owned_));
  return file_.Sha256();
}

Status TensorFile::CheckUnchanged() const {
  return in_memory_ ? Status::Ok() : file_.CheckUnchanged();
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

std::string ShapeString(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

Result<std::vector<float>> ReadTensorF32(const TensorFile& file, const TensorInfo& t,
                                         std::span<const int64_t> expected_shape) {
  const std::string where = file.path() + ": tensor \"" + t.name + "\"";
  if (!std::equal(t.shape.begin(), t.shape.end(), expected_shape.begin(), expected_shape.end())) {
    return InvalidError(where + " has shape " + ShapeString(t.shape) + ", expected " +
                        ShapeString(expected_shape));
  }
  if (t.dtype != DType::kBF16 && t.dtype != DType::kF16 && t.dtype != DType::kF32) {
    return UnimplementedError(where + " has dtype " + std::string(DTypeName(t.dtype)) +
                              "; only BF16, F16 and F32 can be read as f32");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, file.ReadBytes(t));
  std::vector<float> stored(bytes.size() / static_cast<size_t>(DTypeSize(t.dtype)));
  WidenToF32(t.dtype, bytes, stored.data());
  if (t.permuted_heads <= 0) return stored;
  const uint64_t rows = RowsOf(t), cols = stored.size() / std::max<uint64_t>(rows, 1);
  std::vector<float> out(stored.size());
  for (uint64_t r = 0; r < rows; ++r) {
    std::copy_n(stored.begin() + static_cast<ptrdiff_t>(r * cols), cols,
                out.begin() + static_cast<ptrdiff_t>(HfRowOf(t, r) * cols));
  }
  return out;
}

}  // namespace lockstep
