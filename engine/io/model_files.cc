#include "engine/io/model_files.h"

#include <algorithm>
#include <filesystem>

#include "base/json.h"
#include "engine/io/model_config.h"
#include "base/read_only_file.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr const char* kConfig = "config.json";
constexpr const char* kTokenizer = "tokenizer.json";

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

// NotFound when missing, Io saying what it is when not a regular file.
Status RequireRegularFile(const std::string& path) {
  if (IsRegularFile(path)) return Status::Ok();
  const std::string kind = DescribePathKind(path);
  if (kind == "missing") return NotFoundError(path + ": required file not found");
  return IoError(path + ": is " + kind + ", not a regular file");
}

Digest MustHex(std::string_view hex) { return *DigestFromHex(hex); }

// One pinned file: "config.json: sha256 expected <hex>, actual <hex>".
void CheckOne(const char* file, const std::optional<Digest>& pin,
              const Digest& actual, std::string& mismatches) {
  if (!pin || *pin == actual) return;
  if (!mismatches.empty()) mismatches += "; ";
  mismatches += std::string(file) + ": sha256 expected " + ToHex(*pin) +
                ", actual " + ToHex(actual);
}

}  // namespace

Result<ModelFiles> LocateModelFiles(const std::string& dir) {
  std::error_code ec;
  if (IsRegularFile(dir)) {
    if (!IsGgufPath(dir)) {
      return IoError(dir + ": is a regular file, not a model directory or a .gguf file");
    }
    const size_t slash = dir.rfind('/');
    return ModelFiles{slash == std::string::npos ? std::string(".") : dir.substr(0, slash),
                      dir, false, true, dir, dir, true};
  }
  if (!fs::is_directory(dir, ec)) {
    const std::string kind = DescribePathKind(dir);
    if (kind == "missing") return NotFoundError(dir + ": model directory not found");
    return IoError(dir + ": is " + kind + ", not a model directory");
  }
  ModelFiles files;
  files.dir = dir;
  files.config_path = dir + "/" + kConfig;
  LOCKSTEP_RETURN_IF_ERROR(RequireRegularFile(files.config_path));
  const std::string single = dir + "/" + kSingleWeightsFile;
  const std::string index = dir + "/" + kShardIndexFile;
  files.sharded = DescribePathKind(single) == "missing" && DescribePathKind(index) != "missing";
  files.weights_path = files.sharded ? index : single;
  LOCKSTEP_RETURN_IF_ERROR(RequireRegularFile(files.weights_path));
  std::string tok = dir + "/" + kTokenizer;
  files.has_tokenizer = IsRegularFile(tok);
  if (files.has_tokenizer) files.tokenizer_path = tok;
  return files;
}

Result<ArtifactHashes> HashArtifacts(const ModelFiles& files, const Checkpoint& weights,
                                     int threads) {
  LOCKSTEP_ASSIGN_OR_RETURN(ArtifactHashes h, HashConfigAndTokenizer(files));
  LOCKSTEP_ASSIGN_OR_RETURN(std::vector<FileDigest> digests, weights.HashFiles(threads));
  SetWeightDigests(h, std::move(digests), weights);
  return h;
}

void SetWeightDigests(ArtifactHashes& h, std::vector<FileDigest> digests,
                      const Checkpoint& weights) {
  h.weight_files = std::move(digests);
  h.weights = Digest{};
  if (weights.hashes_whole()) {
    h.weights = Checkpoint::WeightsSha256(h.weight_files, weights.sharded());
  }
  if (weights.gguf()) h.config = h.tokenizer = h.weights;  // E2.5
}

Result<ArtifactHashes> HashConfigAndTokenizer(const ModelFiles& files) {
  ArtifactHashes h{};
  if (files.gguf) return h;  // the file's own digest, once hashed
  LOCKSTEP_ASSIGN_OR_RETURN(h.config, Sha256File(files.config_path));
  if (files.has_tokenizer) {
    LOCKSTEP_ASSIGN_OR_RETURN(h.tokenizer, Sha256File(files.tokenizer_path));
  } else {
    h.tokenizer = Sha256(std::string_view());
  }
  return h;
}

std::optional<ModelPins> BuiltinPins(std::string_view name) {
  if (name != "smollm2-135m") return std::nullopt;
  ModelPins p;  // CIS-2 §2.1
  p.name = "smollm2-135m";
  p.weights = MustHex("80521b40281d6ce74e35c9282c22539e75aa0ac8578892b2a59955ef78d55da1");
  p.config = MustHex("1d556eab73b69c7f11f64c557a2f9c6f440bd4c6b89bb2584a6b498c92603843");
  p.tokenizer = MustHex("9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c");
  return p;
}

Result<ModelPins> ParseManifest(std::string_view json_text, const std::string& name) {
  LOCKSTEP_ASSIGN_OR_RETURN(nlohmann::json j,
                            ParseJsonStrict(json_text, name, ErrorKind::kInvalid));
  if (!j.is_object()) return InvalidError(name + ": manifest is not a JSON object");
  ModelPins pins;
  pins.name = name;
  for (const auto& [key, value] : j.items()) {
    if (key == "files") {
      if (!value.is_object()) return InvalidError(name + ": field \"files\": not an object");
      for (const auto& [file, hex] : value.items()) {
        std::string where = name + ": field \"files\": \"" + file + "\"";
        if (!hex.is_string()) return InvalidError(where + ": not a string");
        auto d = DigestFromHex(hex.get<std::string>());
        if (!d.ok()) return InvalidError(where + ": not 64 hex digits");
        pins.files[file] = *d;
      }
      continue;
    }
    std::optional<Digest>* slot = key == "weights_sha256"     ? &pins.weights
                                  : key == "tokenizer_sha256" ? &pins.tokenizer
                                  : key == "config_sha256"    ? &pins.config
                                                              : nullptr;
    if (slot == nullptr) return InvalidError(name + ": unknown key \"" + key + "\"");
    std::string where = name + ": field \"" + key + "\"";
    if (!value.is_string()) return InvalidError(where + ": not a string");
    auto d = DigestFromHex(value.get<std::string>());
    if (!d.ok()) return InvalidError(where + ": not 64 hex digits");
    *slot = *d;
  }
  return pins;
}

Result<ModelPins> LoadManifest(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(path, kMaxConfigJsonBytes, "a manifest"));
  return ParseManifest(text, path);
}

Status VerifyPins(const ArtifactHashes& actual, const ModelPins& pins,
                  const std::vector<std::string>& weight_file_names) {
  std::string mismatches;
  for (const auto& entry : pins.files) {
    const std::string& file = entry.first;
    const Digest& pin = entry.second;
    auto it = std::find_if(actual.weight_files.begin(), actual.weight_files.end(),
                           [&](const FileDigest& d) { return d.file == file; });
    if (it != actual.weight_files.end()) {
      CheckOne(file.c_str(), pin, it->sha256, mismatches);
    } else if (file != kShardIndexFile &&
               std::find(weight_file_names.begin(), weight_file_names.end(), file) ==
                   weight_file_names.end()) {
      if (!mismatches.empty()) mismatches += "; ";
      mismatches += file + ": pinned but not part of the checkpoint";
    }
  }
  const bool sharded = !actual.weight_files.empty() && actual.weight_files[0].file == kShardIndexFile;
  const std::string label = sharded                          ? "weights (sharded checkpoint)"
                            : actual.weight_files.empty() ? kSingleWeightsFile
                                                          : actual.weight_files[0].file;
  const Digest unknown{};
  if (actual.weights != unknown) CheckOne(label.c_str(), pins.weights, actual.weights, mismatches);
  if (actual.tokenizer != unknown) CheckOne(kTokenizer, pins.tokenizer, actual.tokenizer, mismatches);
  if (actual.config != unknown) CheckOne(kConfig, pins.config, actual.config, mismatches);
  if (mismatches.empty()) return Status::Ok();
  std::string source = pins.name.empty() ? "pins" : "pins " + pins.name;
  return MismatchError(source + ": " + mismatches);
}

}  // namespace lockstep
