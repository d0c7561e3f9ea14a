// GgufFile's header validation (docs/gguf.md lists every rule): the header
// is read front to back through a window of the file, every length and
// count checked against the bytes left (and the limits in gguf.h) before
// anything sized by it is allocated, every byte consumed also hashed.
#include <algorithm>
#include <cstring>
#include <limits>
#include <set>

#include "engine/io/gguf.h"
#include "engine/io/gguf_names.h"

namespace lockstep {
namespace {

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint64_t kWindow = uint64_t{1} << 20;
// Fewest bytes a key/value pair and a tensor description can take.
constexpr uint64_t kMinKvBytes = 8 + 1 + 4 + 1;
constexpr uint64_t kMinTensorBytes = 8 + 1 + 4 + 8 + 4 + 8;

int ScalarBytes(GgufType t) {
  switch (t) {
    case GgufType::kU8: case GgufType::kI8: case GgufType::kBool: return 1;
    case GgufType::kU16: case GgufType::kI16: return 2;
    case GgufType::kU32: case GgufType::kI32: case GgufType::kF32: return 4;
    case GgufType::kU64: case GgufType::kI64: case GgufType::kF64: return 8;
    default: return 0;
  }
}

bool KnownType(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::kF64); }

}  // namespace

// Reads the header of one GgufFile (a friend: it fills the file's fields).
class GgufHeaderParser {
 public:
  explicit GgufHeaderParser(GgufFile& f) : f_(f), size_(f.size()) {}

  Status Parse() {
    LOCKSTEP_RETURN_IF_ERROR(ParseStart());
    LOCKSTEP_ASSIGN_OR_RETURN(const uint64_t n_tensors, U64("the tensor count"));
    LOCKSTEP_ASSIGN_OR_RETURN(const uint64_t n_kv, U64("the key/value count"));
    LOCKSTEP_RETURN_IF_ERROR(CheckCounts(n_tensors, n_kv));
    for (uint64_t i = 0; i < n_kv; ++i) LOCKSTEP_RETURN_IF_ERROR(ParseKeyValue(i));
    for (uint64_t i = 0; i < n_tensors; ++i) LOCKSTEP_RETURN_IF_ERROR(ParseTensorInfo(i));
    LOCKSTEP_RETURN_IF_ERROR(ParseAlignment());
    LOCKSTEP_RETURN_IF_ERROR(PlaceDataSection());
    return PlaceTensors();
  }

 private:
  Status Corrupt(const std::string& what) const { return CorruptError(f_.path() + ": " + what); }

  // Consumes n bytes (hashed); `what` names them in the error when the
  // file (or the header limit) ends first.
  Result<const uint8_t*> Take(uint64_t n, const std::string& what) {
    if (n > size_ - pos_) {
      return Corrupt(what + ": needs " + std::to_string(n) + " bytes at offset " +
                     std::to_string(pos_) + ", but the " + std::to_string(size_) +
                     "-byte file ends first (truncated?)");
    }
    if (pos_ + n > kMaxGgufHeaderBytes) {
      return Corrupt(what + ": the header runs past " +
                     std::to_string(kMaxGgufHeaderBytes >> 20) + " MiB, the limit");
    }
    if (pos_ < window_start_ || pos_ + n > window_start_ + window_.size()) {
      window_start_ = pos_;
      window_.resize(static_cast<size_t>(std::min(std::max(n, kWindow), size_ - pos_)));
      LOCKSTEP_RETURN_IF_ERROR(f_.ReadRange(pos_, window_));
    }
    const uint8_t* p = window_.data() + (pos_ - window_start_);
    sha_.Update(std::span<const uint8_t>(p, static_cast<size_t>(n)));
    pos_ += n;
    return p;
  }

  Result<uint64_t> Uint(int bytes, const std::string& what) {
    LOCKSTEP_ASSIGN_OR_RETURN(const uint8_t* p, Take(static_cast<uint64_t>(bytes), what));
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  Result<uint32_t> U32(const std::string& what) {
    LOCKSTEP_ASSIGN_OR_RETURN(uint64_t v, Uint(4, what));
    return static_cast<uint32_t>(v);
  }
  Result<uint64_t> U64(const std::string& what) { return Uint(8, what); }

  Result<std::string> String(uint64_t max, const std::string& what) {
    LOCKSTEP_ASSIGN_OR_RETURN(const uint64_t n, U64(what + " length"));
    if (n > max) {
      return Corrupt(what + ": length " + std::to_string(n) + " is over the limit of " +
                     std::to_string(max) + " bytes");
    }
    LOCKSTEP_ASSIGN_OR_RETURN(const uint8_t* p, Take(n, what));
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }

  Status ParseStart() {
    if (size_ < 24) {
      return Corrupt("file is " + std::to_string(size_) +
                     " bytes, shorter than a GGUF header (24 bytes before the first key)");
    }
    LOCKSTEP_ASSIGN_OR_RETURN(const uint32_t magic, U32("magic"));
    if (magic != kMagic) return Corrupt("not a GGUF file (its first four bytes are not \"GGUF\")");
    LOCKSTEP_ASSIGN_OR_RETURN(f_.version_, U32("version"));
    const uint32_t v = f_.version_;
    if (v == 2 || v == 3) return Status::Ok();
    const uint32_t swapped = __builtin_bswap32(v);
    if (swapped >= 1 && swapped <= 3) {
      return UnimplementedError(f_.path() + ": a big-endian GGUF file (version field " +
                                std::to_string(v) + "); only little-endian files are read");
    }
    if (v == 1) return UnimplementedError(f_.path() + ": GGUF version 1 is not supported (2 and 3 are)");
    return Corrupt("version " + std::to_string(v) + " is not a GGUF version this reader knows (2, 3)");
  }

  Status CheckCounts(uint64_t n_tensors, uint64_t n_kv) {
    if (n_kv > kMaxGgufKeys) {
      return Corrupt("key/value count " + std::to_string(n_kv) + " is over the limit of " +
                     std::to_string(kMaxGgufKeys));
    }
    if (n_tensors > kMaxGgufTensors) {
      return Corrupt("tensor count " + std::to_string(n_tensors) + " is over the limit of " +
                     std::to_string(kMaxGgufTensors));
    }
    if (n_kv * kMinKvBytes + n_tensors * kMinTensorBytes > size_ - pos_) {
      return Corrupt(std::to_string(n_kv) + " keys and " + std::to_string(n_tensors) +
                     " tensors cannot fit in the " + std::to_string(size_ - pos_) +
                     " bytes left (truncated, or the counts are wrong)");
    }
    return Status::Ok();
  }

  Status ParseKeyValue(uint64_t i) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::string key,
                              String(kMaxGgufKeyBytes, "key #" + std::to_string(i)));
    if (key.empty()) return Corrupt("key #" + std::to_string(i) + " is empty");
    const std::string where = "key \"" + key + "\"";
    if (f_.metadata_.count(key) > 0) return Corrupt(where + " appears twice");
    LOCKSTEP_ASSIGN_OR_RETURN(const uint32_t vtype, U32(where + ": value type"));
    GgufValue v;
    LOCKSTEP_RETURN_IF_ERROR(ParseValue(vtype, where, v));
    f_.metadata_.emplace(std::move(key), std::move(v));
    return Status::Ok();
  }

  Status ParseValue(uint32_t vtype, const std::string& where, GgufValue& v) {
    if (!KnownType(vtype)) return Corrupt(where + ": unknown value type " + std::to_string(vtype));
    v.type = static_cast<GgufType>(vtype);
    if (v.type == GgufType::kString) {
      LOCKSTEP_ASSIGN_OR_RETURN(v.string, String(kMaxGgufStringBytes, where));
      return Status::Ok();
    }
    if (v.type == GgufType::kArray) return ParseArray(where, v);
    LOCKSTEP_ASSIGN_OR_RETURN(v.bits, Uint(ScalarBytes(v.type), where));
    return CheckBool(v.type, v.bits, where);
  }

  Status CheckBool(GgufType t, uint64_t bits, const std::string& where) const {
    if (t == GgufType::kBool && bits > 1) {
      return Corrupt(where + ": bool byte is " + std::to_string(bits) + ", not 0 or 1");
    }
    return Status::Ok();
  }

  Status ParseArray(const std::string& where, GgufValue& v) {
    LOCKSTEP_ASSIGN_OR_RETURN(const uint32_t etype, U32(where + ": array element type"));
    if (etype == static_cast<uint32_t>(GgufType::kArray)) {
      return Corrupt(where + ": an array of arrays (not read)");
    }
    if (!KnownType(etype)) {
      return Corrupt(where + ": unknown array element type " + std::to_string(etype));
    }
    v.element_type = static_cast<GgufType>(etype);
    LOCKSTEP_ASSIGN_OR_RETURN(const uint64_t count, U64(where + ": array length"));
    const bool strings = v.element_type == GgufType::kString;
    const uint64_t min_bytes = strings ? 8 : static_cast<uint64_t>(ScalarBytes(v.element_type));
    if (count > kMaxGgufArrayElements || count * min_bytes > size_ - pos_) {
      return Corrupt(where + ": array length " + std::to_string(count) +
                     (count > kMaxGgufArrayElements
                          ? " is over the limit of " + std::to_string(kMaxGgufArrayElements)
                          : " does not fit in the " + std::to_string(size_ - pos_) +
                                " bytes left"));
    }
    if (strings) return ParseStrings(count, where, v);
    const int width = ScalarBytes(v.element_type);
    LOCKSTEP_ASSIGN_OR_RETURN(const uint8_t* p, Take(count * static_cast<uint64_t>(width), where));
    v.numbers.resize(static_cast<size_t>(count));
    for (size_t e = 0; e < v.numbers.size(); ++e) {
      uint64_t bits = 0;
      for (int b = width - 1; b >= 0; --b) bits = (bits << 8) | p[e * static_cast<size_t>(width) + static_cast<size_t>(b)];
      LOCKSTEP_RETURN_IF_ERROR(CheckBool(v.element_type, bits, where + "[" + std::to_string(e) + "]"));
      v.numbers[e] = bits;
    }
    return Status::Ok();
  }

  Status ParseStrings(uint64_t count, const std::string& where, GgufValue& v) {
    v.strings.reserve(static_cast<size_t>(count));
    for (uint64_t e = 0; e < count; ++e) {
      LOCKSTEP_ASSIGN_OR_RETURN(std::string s,
                                String(kMaxGgufStringBytes, where + "[" + std::to_string(e) + "]"));
      v.strings.push_back(std::move(s));
    }
    return Status::Ok();
  }

  Status ParseTensorInfo(uint64_t i) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::string name, String(kMaxGgufKeyBytes, "tensor #" + std::to_string(i) + " name"));
    const std::string where = "tensor \"" + name + "\"";
    if (f_.tensor_index_.count(name) > 0) return Corrupt(where + " appears twice");
    if (!IsGgufTensorName(name)) {
      return UnimplementedError(f_.path() + ": " + where +
                                " is not a tensor of the llama, qwen2, qwen3 or qwen3moe "
                                "architectures (EXTENSIONS.md E2.2)");
    }
    GgufTensor t;
    t.name = name;
    LOCKSTEP_ASSIGN_OR_RETURN(const uint32_t n_dims, U32(where + ": n_dims"));
    if (n_dims < 1 || n_dims > 4) {
      return Corrupt(where + ": n_dims " + std::to_string(n_dims) + " is not in 1..4");
    }
    for (uint32_t d = 0; d < n_dims; ++d) {
      LOCKSTEP_ASSIGN_OR_RETURN(const uint64_t ne, U64(where + ": ne[" + std::to_string(d) + "]"));
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return Corrupt(where + ": ne[" + std::to_string(d) + "] = " + std::to_string(ne) +
                       " is not in 1..2^63-1");
      }
      t.ne.push_back(ne);
    }
    LOCKSTEP_ASSIGN_OR_RETURN(const uint32_t ggml, U32(where + ": type"));
    const std::optional<DType> dtype = DTypeFromGgml(ggml);
    if (!dtype) {
      return UnimplementedError(f_.path() + ": " + where + ": ggml type " + std::to_string(ggml) +
                                " is not one of F32, F16, BF16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K");
    }
    t.dtype = *dtype;
    LOCKSTEP_ASSIGN_OR_RETURN(t.nbytes, ByteSize(t, where));
    LOCKSTEP_ASSIGN_OR_RETURN(t.offset, U64(where + ": offset"));
    f_.tensor_index_.emplace(name, f_.tensors_.size());
    f_.tensors_.push_back(std::move(t));
    return Status::Ok();
  }

  Result<uint64_t> ByteSize(const GgufTensor& t, const std::string& where) const {
    const uint64_t block = static_cast<uint64_t>(DTypeBlockElems(t.dtype));
    if (t.ne[0] % block != 0) {
      return Corrupt(where + ": ne[0] = " + std::to_string(t.ne[0]) + " is not a multiple of " +
                     std::to_string(block) + ", the " + std::string(DTypeName(t.dtype)) +
                     " block size");
    }
    uint64_t bytes = DTypeRowBytes(t.dtype, t.ne[0]);
    for (size_t d = 1; d < t.ne.size(); ++d) {
      if (__builtin_mul_overflow(bytes, t.ne[d], &bytes)) {
        return Corrupt(where + ": its size in bytes overflows 64 bits");
      }
    }
    return bytes;
  }

  Status ParseAlignment() {
    const GgufValue* a = f_.Find("general.alignment");
    if (a == nullptr) return Status::Ok();
    if (a->type != GgufType::kU32) {
      return Corrupt("key \"general.alignment\": is a " + std::string(GgufTypeName(a->type)) +
                     ", not a u32");
    }
    if (a->bits == 0 || (a->bits & (a->bits - 1)) != 0) {
      return Corrupt("key \"general.alignment\": " + std::to_string(a->bits) +
                     " is not a power of two");
    }
    f_.alignment_ = a->bits;
    return Status::Ok();
  }

  // The padding after the header (hashed with it) up to the data section.
  Status PlaceDataSection() {
    const uint64_t align = f_.alignment_;
    const uint64_t start = (pos_ + align - 1) / align * align;
    if (start > size_) {
      return Corrupt("the data section would start at byte " + std::to_string(start) +
                     ", past the end of the " + std::to_string(size_) + "-byte file");
    }
    LOCKSTEP_RETURN_IF_ERROR(Take(start - pos_, "the padding after the header").status());
    f_.data_start_ = start;
    f_.header_sha256_ = sha_.Finalize();
    return Status::Ok();
  }

  Status PlaceTensors() {
    const uint64_t data_size = size_ - f_.data_start_;
    std::vector<GgufTensor*> by_offset;
    for (GgufTensor& t : f_.tensors_) {
      const std::string where = "tensor \"" + t.name + "\"";
      if (t.offset % f_.alignment_ != 0) {
        return Corrupt(where + ": offset " + std::to_string(t.offset) +
                       " is not a multiple of the alignment " + std::to_string(f_.alignment_));
      }
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        return Corrupt(where + ": its " + std::to_string(t.nbytes) + " bytes at data offset " +
                       std::to_string(t.offset) + " run past the end of the " +
                       std::to_string(data_size) + "-byte data section (truncated?)");
      }
      t.offset += f_.data_start_;
      by_offset.push_back(&t);
    }
    std::sort(by_offset.begin(), by_offset.end(),
              [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const GgufTensor& prev = *by_offset[i - 1];
      if (by_offset[i]->offset < prev.offset + prev.nbytes) {
        return Corrupt("tensor \"" + by_offset[i]->name + "\": its bytes overlap tensor \"" +
                       prev.name + "\"");
      }
    }
    return Status::Ok();
  }

  GgufFile& f_;
  const uint64_t size_;
  uint64_t pos_ = 0;
  std::vector<uint8_t> window_;
  uint64_t window_start_ = 0;
  Sha256Stream sha_;
};

Status GgufFile::Parse() { return GgufHeaderParser(*this).Parse(); }

}  // namespace lockstep
