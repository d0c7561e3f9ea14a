// Checkpoint: the weights of a model folder, in one safetensors file or in
// several listed by a Hugging Face index (docs/safetensors.md, "Sharded
// checkpoints"), seen as one set of named tensors.
//
// Single file: model.safetensors. Sharded: model.safetensors.index.json,
// {"metadata": {...}, "weight_map": {tensor: file}}, and the files it names
// (plain names in the same folder). The index decides which file holds a
// tensor; each named file must hold every tensor the index places in it
// (else Corrupt naming both). Tensors a file holds that the index places
// elsewhere or omits are never read.
//
// A filter opens only the files that hold some wanted tensor, so a pipeline
// stage opens (and hashes) only its share of a sharded checkpoint.
//
// Weight identity (docs/spec_notes.md, "Sharded checkpoints"): a single file
// keeps CIS-2's weights_sha256 = sha256(model.safetensors). A sharded
// checkpoint's is SHA-256 over the concatenated 32-byte digests of the index
// file, then of each shard file in bytewise order of file name. FileDigests
// lists every file's own digest, for pins and clear mismatch messages.
//
// ReadAll is the one way a checkpoint's bytes are read for use: each opened
// file is read once, front to back, its SHA-256 computed from exactly the
// bytes handed to the consumers of its tensors, files in parallel and the
// consumers running on every thread while the hashes advance.
//
// Move-only; immutable after Open; const methods are thread-safe.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "engine/io/safetensors.h"

namespace lockstep {

inline constexpr const char* kSingleWeightsFile = "model.safetensors";
inline constexpr const char* kShardIndexFile = "model.safetensors.index.json";
// Most shard files one index may name (real checkpoints use tens).
inline constexpr size_t kMaxShardFiles = 4096;

// One weight file's own SHA-256, by its name in the model folder.
struct FileDigest {
  std::string file;
  Digest sha256{};
};

struct TensorRef {
  const SafetensorsFile* file = nullptr;
  const TensorInfo* info = nullptr;
};

// A consumer of one tensor's bytes during Checkpoint::ReadAll.
struct TensorSink {
  TensorRef tensor;          // as Find returned it
  uint64_t unit_bytes = 0;   // pieces are whole multiples of this (a row); 0 = the whole tensor
  // Receives bytes [at, at + bytes.size()) of the tensor. Called from any
  // thread, concurrently for distinct pieces; the pieces cover the tensor
  // exactly once.
  std::function<void(uint64_t at, std::span<const uint8_t> bytes)> take;
};

class Checkpoint {
 public:
  // Which tensors a caller will read; empty = every tensor.
  using Filter = std::function<bool(std::string_view tensor_name)>;

  Checkpoint(Checkpoint&&) noexcept = default;
  Checkpoint& operator=(Checkpoint&&) noexcept = default;

  // `weights_path` is model.safetensors or model.safetensors.index.json
  // (ModelFiles::weights_path). Errors name the file and, where there is
  // one, the tensor: missing shard (NotFound), index naming a tensor its
  // file does not hold (Corrupt), malformed index (Corrupt).
  static Result<Checkpoint> Open(const std::string& weights_path, const Filter& filter = {});

  bool sharded() const { return sharded_; }
  // The tensor, or {} when absent (or in a file the filter left closed).
  TensorRef Find(std::string_view name) const;
  // SafetensorsFile::ReadF32 of the file that holds `name`; NotFound
  // naming the checkpoint when no file holds it.
  Result<std::vector<float>> ReadF32(std::string_view name,
                                     std::span<const int64_t> expected_shape) const;

  // Every shard file the index names, sorted, opened or not ({"model.safetensors"}
  // for a single file).
  const std::vector<std::string>& file_names() const { return file_names_; }
  // The opened files, and their names (in the order opened).
  size_t open_files() const { return files_.size(); }
  std::vector<std::string> open_file_names() const;

  // Reads every opened file once on up to `threads` threads (files in
  // parallel, up to eight hashed together by one thread where that pays,
  // sha256_lanes.h; one file's hash is sequential while the sinks of its
  // pieces run on the other threads), handing each sink its tensor's
  // bytes, and returns the digests: the index first when sharded, then the
  // opened files by name. Memory beyond the sinks' own: at most
  // 2 * threads + 2 buffers of at most 4 MiB (2 * threads + 16 where files
  // are hashed together). Errors name the file (truncated, unreadable);
  // Invalid when two sinks share bytes or a sink's tensor is not in an
  // opened file. After an error the sinks may have received part of their
  // bytes.
  Result<std::vector<FileDigest>> ReadAll(std::span<const TensorSink> sinks, int threads) const;
  // ReadAll with no sinks: only the digests.
  Result<std::vector<FileDigest>> HashFiles(int threads) const { return ReadAll({}, threads); }
  // weights_sha256 from HashFiles' result. REQUIRES every file opened.
  static Digest WeightsSha256(const std::vector<FileDigest>& digests, bool sharded);

  // Mismatch naming the first opened file rewritten since Open.
  Status CheckUnchanged() const;

  // A name a message can use for the whole checkpoint (the path opened).
  const std::string& path() const { return path_; }

 private:
  Checkpoint() = default;

  std::string path_;
  std::string dir_;
  bool sharded_ = false;
  Digest index_sha256_{};  // of the index bytes parsed, sharded only
  std::vector<std::string> file_names_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;  // opened ones
  std::map<std::string, TensorRef, std::less<>> tensors_;
};

}  // namespace lockstep
