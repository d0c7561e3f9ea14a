#include "engine/io/checkpoint.h"

#include <algorithm>
#include <set>

#include "base/json.h"
#include "engine/io/gguf.h"
#include "engine/io/gguf_config.h"
#include "engine/io/gguf_names.h"

namespace lockstep {
namespace {

// Largest index file accepted (real ones are tens of KB per thousand tensors).
constexpr uint64_t kMaxIndexBytes = 64ull << 20;

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string(".") : path.substr(0, slash);
}

// A shard must be a plain file name in the model folder.
bool PlainFileName(const std::string& f) {
  return !f.empty() && f != "." && f != ".." && f.find('/') == std::string::npos &&
         f.find('\0') == std::string::npos && f.size() <= 255;
}

// weight_map: tensor name -> file name, validated.
Result<std::map<std::string, std::string, std::less<>>> ParseIndex(std::string_view text,
                                                                   const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(nlohmann::json j, ParseJsonStrict(text, path, ErrorKind::kCorrupt));
  if (!j.is_object()) return CorruptError(path + ": not a JSON object");
  if (!j.contains("weight_map")) return CorruptError(path + ": no \"weight_map\"");
  const nlohmann::json& map = j["weight_map"];
  if (!map.is_object() || map.empty()) {
    return CorruptError(path + ": \"weight_map\" is not a non-empty object");
  }
  std::map<std::string, std::string, std::less<>> out;
  for (const auto& [tensor, file] : map.items()) {
    if (!file.is_string() || !PlainFileName(file.get<std::string>())) {
      return CorruptError(path + ": tensor \"" + tensor +
                          "\": file must be a plain file name in the model folder, got " +
                          file.dump());
    }
    out.emplace(tensor, file.get<std::string>());
  }
  return out;
}

}  // namespace

bool IsGgufPath(std::string_view path) {
  return path.size() > 5 && path.substr(path.size() - 5) == ".gguf";
}

Result<Checkpoint> Checkpoint::OpenGguf(const std::string& path, const Filter& filter) {
  Checkpoint c;
  c.path_ = path;
  c.dir_ = DirOf(path);
  c.gguf_ = true;
  c.partial_ = static_cast<bool>(filter);
  const std::string base = path.substr(path.rfind('/') + 1);
  c.file_names_.push_back(base);
  LOCKSTEP_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(path));
  LOCKSTEP_ASSIGN_OR_RETURN(c.gguf_config_, ModelConfigFromGguf(f));
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<HfTensor> presented, HfTensorsOf(f, c.gguf_config_));
  f.ReleaseMetadata();  // the config holds what the weights need of it
  // The parts: the header, then the tensors wanted (every one unfiltered;
  // rope_freqs always, as the config holds its values).
  std::set<std::string> wanted = {kGgufRopeFreqs};
  for (const HfTensor& t : presented) {
    if (!filter || filter(t.info.name)) {
      wanted.insert(t.gguf_name);
      c.gguf_tensors_.push_back(t.info);
    }
  }
  c.parts_.push_back({base + ":header", 0, f.data_start()});
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& g : f.tensors()) {
    if (!filter || wanted.count(g.name) > 0) by_offset.push_back(&g);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (const GgufTensor* g : by_offset) c.parts_.push_back({base + ":" + g->name, g->offset, g->nbytes});
  c.gguf_header_sha256_ = f.header_sha256();
  c.files_.push_back(std::make_unique<GgufFile>(std::move(f)));
  for (const TensorInfo& t : c.gguf_tensors_) c.tensors_.emplace(t.name, TensorRef{c.files_[0].get(), &t});
  return c;
}

Result<Checkpoint> Checkpoint::Open(const std::string& weights_path, const Filter& filter) {
  if (IsGgufPath(weights_path)) return OpenGguf(weights_path, filter);
  Checkpoint c;
  c.path_ = weights_path;
  c.dir_ = DirOf(weights_path);
  const std::string base = weights_path.substr(weights_path.rfind('/') + 1);
  c.sharded_ = base == kShardIndexFile;
  if (!c.sharded_) {
    LOCKSTEP_ASSIGN_OR_RETURN(SafetensorsFile f, SafetensorsFile::Open(weights_path));
    c.files_.push_back(std::make_unique<SafetensorsFile>(std::move(f)));
    c.file_names_.push_back(base);
    const auto& file = static_cast<const SafetensorsFile&>(*c.files_[0]);
    for (const TensorInfo& t : file.tensors()) {
      if (!filter || filter(t.name)) c.tensors_.emplace(t.name, TensorRef{&file, &t});
    }
    return c;
  }
  LOCKSTEP_ASSIGN_OR_RETURN(ReadOnlyFile index, ReadOnlyFile::Open(weights_path));
  if (index.size() > kMaxIndexBytes) {
    return CorruptError(weights_path + ": " + std::to_string(index.size()) +
                        " bytes, over the " + std::to_string(kMaxIndexBytes >> 20) +
                        " MiB limit for an index");
  }
  std::string text(index.size(), '\0');
  LOCKSTEP_RETURN_IF_ERROR(index.ReadAt(
      0, std::span<uint8_t>(reinterpret_cast<uint8_t*>(text.data()), text.size()), "the index"));
  c.index_sha256_ = Sha256(std::string_view(text));
  LOCKSTEP_ASSIGN_OR_RETURN(auto weight_map, ParseIndex(text, weights_path));
  std::set<std::string> all, wanted;
  for (const auto& [tensor, file] : weight_map) {
    all.insert(file);
    if (!filter || filter(tensor)) wanted.insert(file);
  }
  if (all.size() > kMaxShardFiles) {
    return CorruptError(weights_path + ": names " + std::to_string(all.size()) +
                        " files, over the limit of " + std::to_string(kMaxShardFiles));
  }
  c.file_names_.assign(all.begin(), all.end());
  std::map<std::string, const SafetensorsFile*> by_name;
  for (const std::string& name : wanted) {
    const std::string path = c.dir_ + "/" + name;
    Result<SafetensorsFile> f = SafetensorsFile::Open(path);
    if (!f.ok()) {
      return Status(f.status().kind(), "shard named by " + weights_path + ": " +
                                           f.status().message());
    }
    auto opened = std::make_unique<SafetensorsFile>(std::move(f).value());
    by_name[name] = opened.get();
    c.files_.push_back(std::move(opened));
  }
  for (const auto& [tensor, file] : weight_map) {
    if (filter && !filter(tensor)) continue;
    const SafetensorsFile* f = by_name.at(file);
    const TensorInfo* t = f->Find(tensor);
    if (t == nullptr) {
      return CorruptError(weights_path + ": names tensor \"" + tensor + "\" in " + file +
                          ", which does not hold it");
    }
    c.tensors_.emplace(tensor, TensorRef{f, t});
  }
  return c;
}

std::vector<std::string> Checkpoint::open_file_names() const {
  std::vector<std::string> out;
  for (const auto& f : files_) out.push_back(f->path().substr(f->path().rfind('/') + 1));
  return out;
}

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& entry : tensors_) out.push_back(entry.first);
  return out;
}

TensorRef Checkpoint::Find(std::string_view name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? TensorRef{} : it->second;
}

Result<std::vector<float>> Checkpoint::ReadF32(std::string_view name,
                                               std::span<const int64_t> expected_shape) const {
  const TensorRef r = Find(name);
  if (r.file == nullptr) {
    return NotFoundError(path_ + ": tensor \"" + std::string(name) + "\" not found");
  }
  return ReadTensorF32(*r.file, *r.info, expected_shape);
}

std::vector<std::string> Checkpoint::digest_names() const {
  std::vector<std::string> out;
  if (partial_) {
    for (const DigestRange& p : parts_) out.push_back(p.name);
    return out;
  }
  if (sharded_) out.push_back(kShardIndexFile);
  for (const std::string& f : open_file_names()) out.push_back(f);
  return out;
}

Digest Checkpoint::WeightsSha256(const std::vector<FileDigest>& digests, bool sharded) {
  if (!sharded) return digests.at(0).sha256;  // the file; any parts follow it
  Sha256Stream s;
  for (const FileDigest& d : digests) s.Update(d.sha256);  // a sharded checkpoint has no parts
  return s.Finalize();
}

Status Checkpoint::CheckUnchanged() const {
  for (const auto& f : files_) LOCKSTEP_RETURN_IF_ERROR(f->CheckUnchanged());
  return Status::Ok();
}

}  // namespace lockstep
