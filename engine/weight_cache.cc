#include "engine/weight_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "engine/io/atomic_file.h"

namespace lockstep {
namespace {

constexpr char kMagic[8] = {'L', 'S', 'P', 'A', 'C', 'K', 'v', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kAlign = 4096;
constexpr uint64_t kMaxEntries = uint64_t{1} << 20;
constexpr size_t kMaxName = 1024;

uint64_t RoundUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Bytes PackedMatrix stores for rows x cols of `type`, or 0 when that
// overflows or either is zero.
uint64_t StoredBytes(uint64_t rows, uint64_t cols, ops::WeightType type) {
  const uint64_t limit = uint64_t{1} << 40;
  if (rows == 0 || cols == 0 || rows > limit || cols > limit) return 0;
  const uint64_t panels = (rows + ops::kPanelRows - 1) / ops::kPanelRows;
  const uint64_t elems = panels * ops::kPanelRows;
  if (elems > limit / cols) return 0;
  return elems * cols * (type == ops::WeightType::kF32 ? 4 : 2);
}

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
  std::string key = "lockstep weight cache v1\n";
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

Result<WeightCache> WeightCache::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return NotFoundError("weight cache " + path + " does not exist");
    return IoError("weight cache " + path + ": open: " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return IoError("weight cache " + path + " is not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  auto corrupt = [&](const std::string& what) {
    return CorruptError("weight cache " + path + ": " + what);
  };
  if (size < 24) {
    ::close(fd);
    return corrupt("shorter than its fixed header (" + std::to_string(size) + " bytes)");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return IoError("weight cache " + path + ": mmap: " + std::strerror(errno));
  WeightCache c;
  c.map_ = std::shared_ptr<const uint8_t>(static_cast<const uint8_t*>(p),
                                          [size](const uint8_t* q) { ::munmap(const_cast<uint8_t*>(q), size); });
  Reader r(c.map_.get(), size);
  char magic[8];
  uint32_t version = 0, count = 0;
  uint64_t header = 0;
  r.Take(magic, 8), r.Get(&version), r.Get(&count), r.Get(&header);
  if (std::memcmp(magic, kMagic, 8) != 0) return corrupt("not a weight cache (bad magic)");
  if (version != kVersion) return corrupt("version " + std::to_string(version) + ", expected 1");
  if (count > kMaxEntries) return corrupt(std::to_string(count) + " entries");
  if (header == 0 || header % kAlign != 0 || header > size) {
    return corrupt("header of " + std::to_string(header) + " bytes in a file of " + std::to_string(size));
  }
  Reader h(c.map_.get() + 24, header - 24);
  for (uint32_t i = 0; i < count; ++i) {
    const std::string where = "entry " + std::to_string(i);
    uint16_t len = 0;
    if (!h.Get(&len) || len == 0 || len > kMaxName) return corrupt(where + ": bad name length");
    std::string name(len, '\0');
    uint8_t type = 0;
    Entry e;
    uint64_t bytes = 0;
    if (!h.Take(name.data(), len) || !h.Get(&type) || !h.Get(&e.rows) || !h.Get(&e.cols) ||
        !h.Get(&e.offset) || !h.Get(&bytes)) {
      return corrupt(where + " runs past the header");
    }
    if (type > 1) return corrupt(where + " (" + name + "): type " + std::to_string(type));
    e.type = type == 0 ? ops::WeightType::kF32 : ops::WeightType::kBf16;
    const uint64_t want = StoredBytes(e.rows, e.cols, e.type);
    if (want == 0 || bytes != want) {
      return corrupt(where + " (" + name + "): " + std::to_string(bytes) + " bytes for " +
                     std::to_string(e.rows) + " x " + std::to_string(e.cols));
    }
    if (e.offset % kAlign != 0 || e.offset < header || e.offset > size || bytes > size - e.offset) {
      return corrupt(where + " (" + name + "): bytes [" + std::to_string(e.offset) + ", +" +
                     std::to_string(bytes) + ") outside the data of a " + std::to_string(size) +
                     "-byte file");
    }
    if (!c.entries_.emplace(std::move(name), e).second) return corrupt(where + ": a second entry of one name");
  }
  return c;
}

std::optional<ops::PackedMatrix> WeightCache::Find(std::string_view name, size_t rows, size_t cols,
                                                   ops::WeightType type) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) return std::nullopt;
  const Entry& e = it->second;
  if (e.rows != rows || e.cols != cols || e.type != type) return std::nullopt;
  return ops::PackedMatrix::View(std::shared_ptr<const void>(map_, map_.get()), map_.get() + e.offset,
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
    Put(header, static_cast<uint8_t>(m->type() == ops::WeightType::kF32 ? 0 : 1));
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
