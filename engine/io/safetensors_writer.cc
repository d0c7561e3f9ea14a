// SafetensorsWriter (declared in safetensors.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "engine/io/safetensors.h"

namespace lockstep {
namespace {

uint64_t ExpectedBytes(DType dtype, const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t d : shape) count *= static_cast<uint64_t>(d);
  return count * static_cast<uint64_t>(DTypeBits(dtype)) / 8;
}

// One header entry, in the key order Hugging Face writes.
std::string EntryJson(const std::string& name, DType dtype,
                      const std::vector<int64_t>& shape, uint64_t begin,
                      uint64_t end) {
  std::string s = nlohmann::json(name).dump() + ":{\"dtype\":\"" +
                  std::string(DTypeName(dtype)) + "\",\"shape\":[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "],\"data_offsets\":[" + std::to_string(begin) + "," +
         std::to_string(end) + "]}";
}

Status WriteAll(int fd, const void* data, size_t size, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(path + ": write: " + std::strerror(errno));
    p += n;
    size -= static_cast<size_t>(n);
  }
  return Status::Ok();
}

// Writes `parts` in order to a fresh temp file beside `path`, then renames.
Status WriteAtomically(const std::string& path,
                       const std::vector<std::span<const uint8_t>>& parts) {
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return IoError(tmp + ": mkstemp: " + std::strerror(errno));
  Status st;
  for (const auto& part : parts) {
    st = WriteAll(fd, part.data(), part.size(), tmp);
    if (!st.ok()) break;
  }
  if (st.ok() && ::fchmod(fd, 0644) != 0) st = IoError(tmp + ": fchmod failed");
  if (::close(fd) != 0 && st.ok()) st = IoError(tmp + ": close failed");
  if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0) {
    st = IoError(path + ": rename: " + std::strerror(errno));
  }
  if (!st.ok()) ::unlink(tmp.c_str());
  return st;
}

}  // namespace

void SafetensorsWriter::Add(std::string name, DType dtype,
                            std::vector<int64_t> shape,
                            std::vector<uint8_t> data) {
  entries_.push_back({std::move(name), dtype, std::move(shape), std::move(data)});
}

std::vector<const SafetensorsWriter::Entry*> SafetensorsWriter::Sorted() const {
  std::vector<const Entry*> sorted;
  for (const Entry& e : entries_) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(),
            [](const Entry* a, const Entry* b) { return a->name < b->name; });
  return sorted;
}

Result<std::string> SafetensorsWriter::Header() const {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  uint64_t offset = 0;
  const Entry* prev = nullptr;
  for (const Entry* e : Sorted()) {
    if (prev != nullptr && prev->name == e->name) {
      return InvalidError("tensor \"" + e->name + "\" added twice");
    }
    if (e->name == "__metadata__" ||
        ExpectedBytes(e->dtype, e->shape) != e->data.size()) {
      return InvalidError("tensor \"" + e->name +
                          "\": name reserved or data size does not match shape");
    }
    header += "," + EntryJson(e->name, e->dtype, e->shape, offset,
                              offset + e->data.size());
    offset += e->data.size();
    prev = e;
  }
  header += "}";
  // Pad so that 8 + header.size() is a multiple of 8.
  header.append((8 - header.size() % 8) % 8, ' ');
  return header;
}

Status SafetensorsWriter::WriteFile(const std::string& path) const {
  auto header = Header();
  if (!header.ok()) return header.status().WithContext(path);
  uint8_t len[8];
  uint64_t n = header->size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  std::vector<std::span<const uint8_t>> parts;
  parts.emplace_back(len, 8);
  parts.emplace_back(reinterpret_cast<const uint8_t*>(header->data()), n);
  for (const Entry* e : Sorted()) parts.emplace_back(e->data);
  return WriteAtomically(path, parts);
}

}  // namespace lockstep
