#include "engine/io/safetensors.h"

#include <algorithm>

#include "engine/io/safetensors_header.h"

namespace lockstep {

Result<SafetensorsFile> SafetensorsFile::Open(const std::string& path) {
  SafetensorsFile file;
  LOCKSTEP_RETURN_IF_ERROR(file.OpenFile(path));
  // The 8-byte length, then the header it announces when that is plausible;
  // ParseSafetensorsHeader words every implausible case.
  std::vector<uint8_t> head(std::min<uint64_t>(8, file.size()));
  LOCKSTEP_RETURN_IF_ERROR(file.ReadRange(0, head));
  if (head.size() == 8) {
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | head[static_cast<size_t>(i)];
    if (n <= kMaxSafetensorsHeader && n <= file.size() - 8) {
      head.resize(8 + n);
      LOCKSTEP_RETURN_IF_ERROR(file.ReadRange(8, std::span<uint8_t>(head.data() + 8, n)));
    }
  }
  LOCKSTEP_ASSIGN_OR_RETURN(file.tensors_, ParseSafetensorsHeader(head, file.size(), path));
  return file;
}

Result<SafetensorsFile> SafetensorsFile::FromBuffer(std::vector<uint8_t> bytes,
                                                    std::string name) {
  SafetensorsFile file;
  LOCKSTEP_ASSIGN_OR_RETURN(file.tensors_, ParseSafetensorsHeader(bytes, bytes.size(), name));
  file.TakeBuffer(std::move(bytes), std::move(name));
  return file;
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
  if (t == nullptr) {
    return NotFoundError(path() + ": tensor \"" + std::string(name) + "\" not found");
  }
  return ReadTensorF32(*this, *t, expected_shape);
}

}  // namespace lockstep
