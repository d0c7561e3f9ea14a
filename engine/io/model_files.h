// The artifact files of a model folder (CIS-2 §2.1) and their pins.
//
// A model folder holds config.json and the weights (required) and
// tokenizer.json (optional: a caller may run from token ids alone). The
// weights are model.safetensors, or, when that is absent, a sharded
// checkpoint: model.safetensors.index.json and the files it names
// (engine/io/checkpoint.h). Each file is identified by its SHA-256; a
// ModelPins says which values are expected — the built-in §2.1 pins for
// SmolLM2-135M, or a manifest file for any other model — and VerifyPins
// refuses a folder that differs.
//
// A model may also be one .gguf file (docs/gguf.md): it holds the config,
// the tokenizer and the weights, and its one SHA-256 is all three artifact
// hashes (EXTENSIONS.md E2.5), known once the file is hashed.
//
// When tokenizer.json is absent, ArtifactHashes::tokenizer is the SHA-256 of
// the empty string (e3b0c442...b855), so a pinned tokenizer never verifies
// against a folder without one. Plain data and stateless functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <map>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "engine/io/checkpoint.h"

namespace lockstep {

struct ModelFiles {
  std::string dir;             // the folder (of a .gguf file: the one holding it)
  std::string weights_path;    // dir + "/model.safetensors", or the index, or the .gguf
  bool sharded = false;        // weights_path is model.safetensors.index.json
  bool gguf = false;           // weights_path is a .gguf file, also config and tokenizer
  std::string config_path;     // dir + "/config.json" (the .gguf)
  std::string tokenizer_path;  // dir + "/tokenizer.json", "" when absent (the .gguf)
  bool has_tokenizer = false;  // always for a .gguf (whether it can encode text is its own)
};

// `dir` is a model folder or a .gguf file. NotFound naming the missing path
// when it does not exist or a required file is missing; Io saying what the
// path is when `dir` is neither a directory nor a .gguf file, or a
// required file is not a regular file (a directory, a FIFO).
Result<ModelFiles> LocateModelFiles(const std::string& dir);

struct ArtifactHashes {
  Digest weights;    // weights_sha256 (Checkpoint::WeightsSha256)
  Digest tokenizer;  // sha256(tokenizer.json), or sha256("") when absent
  Digest config;     // sha256(config.json)
  std::vector<FileDigest> weight_files;  // each weight file hashed (index first)
};

// Hashes config.json, tokenizer.json and the opened weight files (files in
// parallel on up to `threads` threads). `weights` is set only when every
// weight file was opened (all zero otherwise). NotFound/Io/Corrupt name the path.
Result<ArtifactHashes> HashArtifacts(const ModelFiles& files, const Checkpoint& weights,
                                     int threads);
// config.json and tokenizer.json only; the weight fields stay empty (and,
// for a .gguf, all three: SetWeightDigests sets them).
Result<ArtifactHashes> HashConfigAndTokenizer(const ModelFiles& files);
// Records the digests of `weights`' opened files (Checkpoint::ReadAll's
// result) and, when it hashes every file whole, weights_sha256 from them
// (for a .gguf file, also config and tokenizer: E2.5).
void SetWeightDigests(ArtifactHashes& h, std::vector<FileDigest> digests,
                      const Checkpoint& weights);

struct ModelPins {
  std::optional<Digest> weights, tokenizer, config;  // nullopt = not pinned
  std::map<std::string, Digest> files;  // weight file name -> sha256
  std::string name;  // "smollm2-135m" or the manifest path, for messages
};

// Built-in pins by model name; "smollm2-135m" carries the three §2.1 hashes.
std::optional<ModelPins> BuiltinPins(std::string_view name);

// A manifest is a JSON object with optional keys weights_sha256,
// tokenizer_sha256, config_sha256, each 64 hex digits, and "files", an
// object from weight file name (a shard, the index, or model.safetensors)
// to 64 hex digits. Any other key, a non-string or malformed value is
// Invalid naming the path and key.
Result<ModelPins> LoadManifest(const std::string& path);
Result<ModelPins> ParseManifest(std::string_view json_text, const std::string& name);

// Mismatch listing every pinned file whose hash differs, naming the file,
// the expected and the actual hex. A pinned weight file that was not hashed
// (another stage's shard) is not checked; one the checkpoint does not name
// at all is a mismatch. Hashes not known yet (all zero: a GGUF file's
// before it is read) are not checked. Ok when every checked hash matches.
Status VerifyPins(const ArtifactHashes& actual, const ModelPins& pins,
                  const std::vector<std::string>& weight_file_names = {});

}  // namespace lockstep
