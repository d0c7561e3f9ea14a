#include "engine/io/model_files.h"

#include <filesystem>

#include "engine/io/json_util.h"
#include "engine/io/model_config.h"

namespace lockstep {
namespace {

namespace fs = std::filesystem;

constexpr const char* kWeights = "model.safetensors";
constexpr const char* kConfig = "config.json";
constexpr const char* kTokenizer = "tokenizer.json";

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
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
  if (!fs::is_directory(dir, ec)) {
    return NotFoundError(dir + ": model directory not found");
  }
  ModelFiles files;
  files.dir = dir;
  files.weights_path = dir + "/" + kWeights;
  files.config_path = dir + "/" + kConfig;
  for (const std::string* p : {&files.config_path, &files.weights_path}) {
    if (!IsRegularFile(*p)) return NotFoundError(*p + ": required file not found");
  }
  std::string tok = dir + "/" + kTokenizer;
  files.has_tokenizer = IsRegularFile(tok);
  if (files.has_tokenizer) files.tokenizer_path = tok;
  return files;
}

Result<ArtifactHashes> HashArtifacts(const ModelFiles& files) {
  ArtifactHashes h;
  LOCKSTEP_ASSIGN_OR_RETURN(h.weights, Sha256File(files.weights_path));
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
  LOCKSTEP_ASSIGN_OR_RETURN(std::string text, ReadTextFile(path));
  return ParseManifest(text, path);
}

Status VerifyPins(const ArtifactHashes& actual, const ModelPins& pins) {
  std::string mismatches;
  CheckOne(kWeights, pins.weights, actual.weights, mismatches);
  CheckOne(kTokenizer, pins.tokenizer, actual.tokenizer, mismatches);
  CheckOne(kConfig, pins.config, actual.config, mismatches);
  if (mismatches.empty()) return Status::Ok();
  std::string source = pins.name.empty() ? "pins" : "pins " + pins.name;
  return MismatchError(source + ": " + mismatches);
}

}  // namespace lockstep
