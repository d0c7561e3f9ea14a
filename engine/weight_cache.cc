#include "engine/weight_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <thread>

#include "engine/io/atomic_file.h"
#include "base/read_only_file.h"
#include "engine/ops/huge_pages.h"

namespace lockstep {
namespace {

constexpr char kMagic[8] = {'L', 'S', 'P', 'A', 'C', 'K', 'v', '1'};
constexpr uint32_t kVersion = 2;
constexpr uint64_t kAlign = 4096;
constexpr uint64_t kMaxEntries = uint64_t{1} << 20;
constexpr size_t kMaxName = 1024;

uint64_t RoundUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// An entry's type byte is the WeightType's value: these are file format.
static_assert(static_cast<int>(ops::WeightType::kF32) == 0 && static_cast<int>(ops::WeightType::kBf16) == 1 &&
              static_cast<int>(ops::WeightType::kF16) == 2 && static_cast<int>(ops::WeightType::kQ8_0) == 3 &&
              static_cast<int>(ops::WeightType::kQ4_0) == 4 && static_cast<int>(ops::WeightType::kQ4_K) == 5 &&
              static_cast<int>(ops::WeightType::kQ5_K) == 6 && static_cast<int>(ops::WeightType::kQ6_K) == 7);
constexpr uint8_t kLastType = 7;

// A bounds-checked little-endian reader over the header.
class Reader {
 public:
  Reader(const uint8_t* p, uint64_t size) : p_(p), size_(size) {}
  bool Take(void* out, uint64_t n) {
    if (n > size_ - at_) return false;
    std::memcpy(out, p_ + at_, n);
    at_ += n;
    return true;
  }
  template <class T>
  bool Get(T* v) { return Take(v, sizeof(T)); }

 private:
  const uint8_t* p_;
  uint64_t size_, at_ = 0;
};

template <class T>
void Put(std::vector<uint8_t>& out, T v) {
  const auto* b = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), b, b + sizeof(T));
}

}  // namespace

Result<std::string> WeightCache::PathFor(const std::string& dir, const Checkpoint& checkpoint,
                                         std::string_view stage_and_format) {
  std::string key = "lockstep weight cache v" + std::to_string(kVersion) + "\n" + ops::PackedLayoutTag() + "\n";
  key += stage_and_format;
  const std::filesystem::path folder = std::filesystem::path(checkpoint.path()).parent_path();
  std::vector<std::string> names = checkpoint.open_file_names();
  if (checkpoint.sharded()) names.insert(names.begin(), std::filesystem::path(checkpoint.path()).filename());
  for (const std::string& name : names) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::absolute(folder / name, ec);
    struct stat st {};
    if (ec || ::stat(p.c_str(), &st) != 0) {
      return IoError("weight cache: cannot stat checkpoint file " + (folder / name).string());
    }
    key += "\n" + p.string() + " " + std::to_string(st.st_dev) + " " + std::to_string(st.st_ino) +
           " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
           std::to_string(st.st_mtim.tv_nsec);
  }
  const Digest d = Sha256(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(key.data()), key.size()));
  return (std::filesystem::path(dir) / (ToHex(d).substr(0, 32) + ".lspack")).string();
}

namespace {

// Reads bytes [begin, end) of `f` into `out + begin` from `threads`
// threads, in pieces; the first failing piece's error.
Status ReadRange(const ReadOnlyFile& f, uint8_t* out, uint64_t begin, uint64_t end, int threads) {
  constexpr uint64_t kPiece = uint64_t{32} << 20;
  const uint64_t pieces = (end - begin + kPiece - 1) / kPiece;
  std::atomic<uint64_t> next{0};
  std::mutex mu;
  Status first;
  auto work = [&] {
    for (uint64_t i; (i = next.fetch_add(1)) < pieces;) {
      const uint64_t at = begin + i * kPiece, n = std::min(kPiece, end - at);
      Status st = f.ReadAt(at, std::span<uint8_t>(out + at, n), "the cached matrices");
      std::lock_guard<std::mutex> lock(mu);
      if (!st.ok() && first.ok()) first = std::move(st);
    }
  };
  std::vector<std::thread> helpers;
  for (uint64_t t = 1; t < std::min<uint64_t>(static_cast<uint64_t>(std::max(threads, 1)), pieces); ++t) {
    helpers.emplace_back(work);
  }
  work();
  for (std::thread& t : helpers) t.join();
  return first;
}

}  // namespace

Result<WeightCache> WeightCache::Open(const std::string& path, int threads) {
  Result<ReadOnlyFile> opened = ReadOnlyFile::Open(path);  // refuses a FIFO without blocking
  if (!opened.ok()) return opened.status().WithContext("weight cache");
  const ReadOnlyFile& f = *opened;
  const uint64_t size = f.size();
  auto corrupt = [&](const std::string& what) {
    return CorruptError("weight cache " + path + ": " + what);
  };
  if (size < 24) return corrupt("shorter than its fixed header (" + std::to_string(size) + " bytes)");
  uint8_t fixed[24];
  LOCKSTEP_RETURN_IF_ERROR(f.ReadAt(0, fixed, "its fixed header"));
  Reader r(fixed, sizeof(fixed));
  char magic[8];
  uint32_t version = 0, count = 0;
  uint64_t header = 0;
  r.Take(magic, 8), r.Get(&version), r.Get(&count), r.Get(&header);
  if (std::memcmp(magic, kMagic, 8) != 0) return corrupt("not a weight cache (bad magic)");
  if (version != kVersion) return corrupt("version " + std::to_string(version) + ", expected " + std::to_string(kVersion));
  if (count > kMaxEntries) return corrupt(std::to_string(count) + " entries");
  if (header == 0 || header % kAlign != 0 || header > size) {
    return corrupt("header of " + std::to_string(header) + " bytes in a file of " + std::to_string(size));
  }
  std::shared_ptr<uint8_t> bytes(ops::AllocateLarge(size).release(), ops::FreeDeleter{});
  LOCKSTEP_RETURN_IF_ERROR(f.ReadAt(0, std::span<uint8_t>(bytes.get(), header), "its header"));
  WeightCache c;
  Reader h(bytes.get() + 24, header - 24);
  for (uint32_t i = 0; i < count; ++i) {
    const std::string where = "entry " + std::to_string(i);
    uint16_t len = 0;
    if (!h.Get(&len) || len == 0 || len > kMaxName) return corrupt(where + ": bad name length");
    std::string name(len, '\0');
    uint8_t type = 0;
    Entry e;
    uint64_t stored = 0;
    if (!h.Take(name.data(), len) || !h.Get(&type) || !h.Get(&e.rows) || !h.Get(&e.cols) ||
        !h.Get(&e.offset) || !h.Get(&stored)) {
      return corrupt(where + " runs past the header");
    }
    if (type > kLastType) return corrupt(where + " (" + name + "): type " + std::to_string(type));
    e.type = static_cast<ops::WeightType>(type);
    const std::optional<size_t> want = ops::PackedMatrix::BytesFor(e.rows, e.cols, e.type);
    if (!want || stored != *want) {
      return corrupt(where + " (" + name + "): " + std::to_string(stored) + " bytes for " +
                     std::to_string(e.rows) + " x " + std::to_string(e.cols) + " of type " +
                     std::to_string(type));
    }
    if (e.offset % kAlign != 0 || e.offset < header || e.offset > size || stored > size - e.offset) {
      return corrupt(where + " (" + name + "): bytes [" + std::to_string(e.offset) + ", +" +
                     std::to_string(stored) + ") outside the data of a " + std::to_string(size) +
                     "-byte file");
    }
    if (!c.entries_.emplace(std::move(name), e).second) return corrupt(where + ": a second entry of one name");
  }
  LOCKSTEP_RETURN_IF_ERROR(ReadRange(f, bytes.get(), header, size, threads));
  c.bytes_ = std::move(bytes);
  return c;
}

std::optional<ops::PackedMatrix> WeightCache::Find(std::string_view name, size_t rows, size_t cols,
                                                   ops::WeightType type) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  if (e.rows != rows || e.cols != cols || e.type != type) return std::nullopt;
  return ops::PackedMatrix::View(std::shared_ptr<const void>(bytes_, bytes_.get()), bytes_.get() + e.offset,
                                 rows, cols, type);
}

Status WeightCache::Write(const std::string& path,
                          const std::vector<std::pair<std::string, const ops::PackedMatrix*>>& matrices) {
  std::vector<uint8_t> header(kMagic, kMagic + 8);
  Put(header, kVersion);
  Put(header, static_cast<uint32_t>(matrices.size()));
  uint64_t table = 0;  // the entries' bytes
  for (const auto& [name, m] : matrices) table += 2 + name.size() + 1 + 4 * 8;
  const uint64_t data = RoundUp(24 + table);
  Put(header, data);
  uint64_t at = data;
  for (const auto& [name, m] : matrices) {
    if (name.empty() || name.size() > kMaxName) return InvalidError("weight cache: bad matrix name " + name);
    Put(header, static_cast<uint16_t>(name.size()));
    header.insert(header.end(), name.begin(), name.end());
    Put(header, static_cast<uint8_t>(m->type()));
    Put(header, static_cast<uint64_t>(m->rows()));
    Put(header, static_cast<uint64_t>(m->cols()));
    Put(header, at);
    Put(header, static_cast<uint64_t>(m->bytes()));
    at = RoundUp(at + m->bytes());
  }
  header.resize(data, 0);
  static const std::vector<uint8_t> zeros(kAlign, 0);
  std::vector<std::span<const uint8_t>> parts{header};
  for (const auto& [name, m] : matrices) {
    parts.push_back(m->stored());
    const uint64_t pad = RoundUp(m->bytes()) - m->bytes();
    if (pad != 0) parts.push_back(std::span<const uint8_t>(zeros).first(pad));
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  if (ec) return IoError("weight cache: cannot create " + std::filesystem::path(path).parent_path().string());
  return WriteFileAtomically(path, parts);
}

}  // namespace lockstep
