#include "engine/io/gguf_writer.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <set>

#include "engine/io/atomic_file.h"

namespace lockstep {
namespace {

constexpr uint64_t kFillChunk = uint64_t{16} << 20;

int WidthOf(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    default: return 8;
  }
}

void PutUint(std::vector<uint8_t>& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void PutString(std::vector<uint8_t>& out, const std::string& s) {
  PutUint(out, s.size(), 8);
  out.insert(out.end(), s.begin(), s.end());
}

void PutValue(std::vector<uint8_t>& out, const GgufValue& v) {
  PutUint(out, static_cast<uint32_t>(v.type), 4);
  if (v.type == GgufType::kString) return PutString(out, v.string);
  if (v.type != GgufType::kArray) return PutUint(out, v.bits, WidthOf(v.type));
  PutUint(out, static_cast<uint32_t>(v.element_type), 4);
  PutUint(out, v.array_size(), 8);
  for (const std::string& s : v.strings) PutString(out, s);
  for (uint64_t n : v.numbers) PutUint(out, n, WidthOf(v.element_type));
}

GgufValue Scalar(GgufType t, uint64_t bits) {
  GgufValue v;
  v.type = t;
  v.bits = bits;
  return v;
}

}  // namespace

GgufValue GgufU32(uint32_t v) { return Scalar(GgufType::kU32, v); }
GgufValue GgufI32(int32_t v) { return Scalar(GgufType::kI32, static_cast<uint32_t>(v)); }
GgufValue GgufF32(float v) { return Scalar(GgufType::kF32, std::bit_cast<uint32_t>(v)); }
GgufValue GgufF64(double v) { return Scalar(GgufType::kF64, std::bit_cast<uint64_t>(v)); }
GgufValue GgufBool(bool v) { return Scalar(GgufType::kBool, v ? 1 : 0); }

GgufValue GgufString(std::string v) {
  GgufValue g;
  g.type = GgufType::kString;
  g.string = std::move(v);
  return g;
}

GgufValue GgufStrings(std::vector<std::string> v) {
  GgufValue g;
  g.type = GgufType::kArray;
  g.element_type = GgufType::kString;
  g.strings = std::move(v);
  return g;
}

GgufValue GgufI32s(const std::vector<int32_t>& v) {
  GgufValue g;
  g.type = GgufType::kArray;
  g.element_type = GgufType::kI32;
  for (int32_t x : v) g.numbers.push_back(static_cast<uint32_t>(x));
  return g;
}

void GgufWriter::Set(std::string key, GgufValue value) {
  keys_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::AddTensor(std::string name, DType dtype, std::vector<uint64_t> ne,
                           std::vector<uint8_t> data) {
  tensors_.push_back({std::move(name), dtype, std::move(ne), std::move(data), {}});
}

void GgufWriter::AddTensor(std::string name, DType dtype, std::vector<uint64_t> ne,
                           RowFill fill) {
  tensors_.push_back({std::move(name), dtype, std::move(ne), {}, std::move(fill)});
}

void GgufWriter::AddF32Vector(std::string name, std::span<const float> values) {
  std::vector<uint8_t> bytes(values.size() * sizeof(float));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  AddTensor(std::move(name), DType::kF32, {values.size()}, std::move(bytes));
}

uint64_t GgufWriter::Alignment() const {
  for (const auto& [key, v] : keys_) {
    if (key == "general.alignment" && v.type == GgufType::kU32 && v.bits != 0) return v.bits;
  }
  return 32;
}

Result<std::vector<uint8_t>> GgufWriter::Header(std::vector<Placed>& placed) const {
  std::vector<uint8_t> out;
  PutUint(out, 0x46554747, 4);
  PutUint(out, 3, 4);
  PutUint(out, tensors_.size(), 8);
  PutUint(out, keys_.size(), 8);
  std::set<std::string> seen;
  for (const auto& [key, value] : keys_) {
    if (!seen.insert(key).second) return InvalidError("gguf writer: key \"" + key + "\" set twice");
    PutString(out, key);
    PutValue(out, value);
  }
  const uint64_t align = Alignment();
  uint64_t at = 0;
  for (const Entry& t : tensors_) {
    if (t.ne.empty() || DTypeFromGgml(GgmlTypeOf(t.dtype)) != t.dtype) {
      return InvalidError("gguf writer: tensor \"" + t.name + "\" has no shape or a dtype GGUF cannot hold");
    }
    Placed p{at, DTypeRowBytes(t.dtype, t.ne[0])};
    for (size_t d = 1; d < t.ne.size(); ++d) p.nbytes *= t.ne[d];
    if (!t.fill && t.data.size() != p.nbytes) {
      return InvalidError("gguf writer: tensor \"" + t.name + "\" has " +
                          std::to_string(t.data.size()) + " bytes, needs " + std::to_string(p.nbytes));
    }
    placed.push_back(p);
    at = (at + p.nbytes + align - 1) / align * align;
    PutString(out, t.name);
    PutUint(out, t.ne.size(), 4);
    for (uint64_t n : t.ne) PutUint(out, n, 8);
    PutUint(out, GgmlTypeOf(t.dtype), 4);
    PutUint(out, p.offset, 8);
  }
  out.resize((out.size() + align - 1) / align * align, 0);
  return out;
}

Status GgufWriter::Produce(const std::vector<Placed>& placed,
                           const std::function<Status(std::span<const uint8_t>)>& write) const {
  const uint64_t align = Alignment();
  std::vector<uint8_t> chunk;
  uint64_t at = 0;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const Entry& t = tensors_[i];
    const Placed& p = placed[i];
    const std::vector<uint8_t> pad(static_cast<size_t>(p.offset - at), 0);
    LOCKSTEP_RETURN_IF_ERROR(write(pad));
    if (!t.fill) {
      LOCKSTEP_RETURN_IF_ERROR(write(t.data));
    } else {
      const uint64_t row = DTypeRowBytes(t.dtype, t.ne[0]);
      const uint64_t rows = p.nbytes / row;
      const uint64_t step = std::max<uint64_t>(1, kFillChunk / row);
      for (uint64_t r = 0; r < rows; r += step) {
        chunk.assign(static_cast<size_t>(std::min(step, rows - r) * row), 0);
        LOCKSTEP_RETURN_IF_ERROR(t.fill(r, chunk));
        LOCKSTEP_RETURN_IF_ERROR(write(chunk));
      }
    }
    at = p.offset + p.nbytes;
  }
  const std::vector<uint8_t> tail(static_cast<size_t>((at + align - 1) / align * align - at), 0);
  return tail.empty() ? Status::Ok() : write(tail);
}

Result<std::vector<uint8_t>> GgufWriter::Bytes() const {
  std::vector<Placed> placed;
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<uint8_t> out, Header(placed));
  LOCKSTEP_RETURN_IF_ERROR(Produce(placed, [&out](std::span<const uint8_t> b) {
    out.insert(out.end(), b.begin(), b.end());
    return Status::Ok();
  }));
  return out;
}

Status GgufWriter::Write(const std::string& path) const {
  std::vector<Placed> placed;
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<uint8_t> header, Header(placed));
  return WriteFileAtomically(path, [&](const ByteSink& write) {
    LOCKSTEP_RETURN_IF_ERROR(write(header));
    return Produce(placed, write);
  });
}

}  // namespace lockstep
