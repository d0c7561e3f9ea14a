// SafetensorsWriter (declared in safetensors.h).
#include <nlohmann/json.hpp>

#include <algorithm>

#include "engine/io/atomic_file.h"
#include "engine/io/safetensors.h"

namespace lockstep {
namespace {

uint64_t ExpectedBytes(DType dtype, const std::vector<int64_t>& shape) {
  uint64_t count = 1;
  for (int64_t d : shape) count *= static_cast<uint64_t>(d);
  return count * static_cast<uint64_t>(DTypeBits(dtype)) / 8;
}

// A JSON string literal; Invalid if `name` is not valid UTF-8.
Result<std::string> Quoted(const std::string& name) {
  try {
    return nlohmann::json(name).dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidError("tensor name is not valid UTF-8: " + std::string(e.what()));
  }
}

// One header entry, in the key order Hugging Face writes.
std::string EntryJson(const std::string& quoted_name, DType dtype,
                      const std::vector<int64_t>& shape, uint64_t begin,
                      uint64_t end) {
  std::string s = quoted_name + ":{\"dtype\":\"" +
                  std::string(DTypeName(dtype)) + "\",\"shape\":[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ",";
    s += std::to_string(shape[i]);
  }
  return s + "],\"data_offsets\":[" + std::to_string(begin) + "," +
         std::to_string(end) + "]}";
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
    LOCKSTEP_ASSIGN_OR_RETURN(std::string quoted, Quoted(e->name));
    header += "," + EntryJson(quoted, e->dtype, e->shape, offset,
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
  return WriteFileAtomically(path, parts);
}

}  // namespace lockstep
