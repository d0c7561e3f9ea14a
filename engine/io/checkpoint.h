// Checkpoint: the weights of a model, in one safetensors file, in several
// listed by a Hugging Face index (docs/safetensors.md, "Sharded
// checkpoints"), or in one GGUF file (docs/gguf.md), seen as one set of
// tensors named as CIS-2 §2.5 names them.
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
// GGUF: the file's tensors are presented under their §2.5 names
// (gguf_names.h: expert stacks split, llama-arch q/k rows marked for the
// un-permute), and the file's config is parsed from its header
// (gguf_config.h). Its parts — the header, and each tensor — are hashed on
// their own when asked (DigestRange). With a filter only the parts the
// wanted tensors are in (and the header and rope_freqs.weight, what the
// config is made of) are read and hashed, never the rest of the file: a
// pipeline stage proves its bytes belong to the file by these digests
// (docs/spec_notes.md, "GGUF parts"), and weights_sha256 stays unknown.
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
#include "engine/io/model_config.h"
#include "engine/io/safetensors.h"
#include "engine/io/tensor_file.h"

namespace lockstep {

inline constexpr const char* kSingleWeightsFile = "model.safetensors";
inline constexpr const char* kShardIndexFile = "model.safetensors.index.json";
// Most shard files one index may name (real checkpoints use tens).
inline constexpr size_t kMaxShardFiles = 4096;

// Whether `path` names a GGUF file (ends in ".gguf").
bool IsGgufPath(std::string_view path);

// One weight file's own SHA-256, by its name in the model folder; or one
// part's (DigestRange), by "FILE:PART".
struct FileDigest {
  std::string file;
  Digest sha256{};
};

// A part of a GGUF file hashed on its own: "model.gguf:header" (bytes
// [0, data start), the metadata and tensor descriptions) or
// "model.gguf:<GGUF tensor name>" (that tensor's bytes).
struct DigestRange {
  std::string name;
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct TensorRef {
  const TensorFile* file = nullptr;
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

  // Which parts ReadAll hashes on their own besides whole files.
  enum class Parts : uint8_t {
    kNeeded,  // a GGUF file's header; with a filter, the parts it reads
    kAll,     // also every tensor of a GGUF file (what a coordinator sends)
  };

  // `weights_path` is model.safetensors, model.safetensors.index.json or a
  // .gguf file (ModelFiles::weights_path). Errors name the file and, where
  // there is one, the tensor: missing shard (NotFound), index naming a
  // tensor its file does not hold (Corrupt), malformed index (Corrupt), a
  // GGUF file GgufFile::Open or ModelConfigFromGguf refuses.
  static Result<Checkpoint> Open(const std::string& weights_path, const Filter& filter = {});

  bool sharded() const { return sharded_; }
  bool gguf() const { return gguf_; }
  // A GGUF file opened with a filter: only its needed parts are read.
  bool partial() const { return partial_; }
  // GGUF: the config its header gives (ModelConfigFromGguf).
  const ModelConfig* gguf_config() const { return gguf_ ? &gguf_config_ : nullptr; }
  // GGUF: the parts hashed on their own (header first, then tensors by
  // offset): with a filter the needed ones, else every one.
  const std::vector<DigestRange>& parts() const { return parts_; }
  // GGUF: SHA-256 of the header bytes its config was parsed from.
  const Digest& gguf_header_sha256() const { return gguf_header_sha256_; }
  // The names of the digests ReadAll(kNeeded) gives: the parts of a
  // partial GGUF file, else the index (sharded) and every opened file.
  std::vector<std::string> digest_names() const;
  // The tensor, or {} when absent (or in a file the filter left closed).
  TensorRef Find(std::string_view name) const;
  // Every tensor Find finds, by name.
  std::vector<std::string> tensor_names() const;
  // The tensor as f32 (ReadTensorF32); NotFound naming the checkpoint
  // when no file holds it.
  Result<std::vector<float>> ReadF32(std::string_view name,
                                     std::span<const int64_t> expected_shape) const;

  // Every shard file the index names, sorted, opened or not ({"model.safetensors"}
  // for a single file).
  const std::vector<std::string>& file_names() const { return file_names_; }
  // The opened files, and their names (in the order opened).
  size_t open_files() const { return files_.size(); }
  std::vector<std::string> open_file_names() const;

  // Reads every opened file (of a partial GGUF file, its parts) once on
  // up to `threads` threads (files in
  // parallel, up to eight hashed together by one thread where that pays,
  // sha256_lanes.h; one file's hash is sequential while the sinks of its
  // pieces run on the other threads), handing each sink its tensor's
  // bytes, and returns the digests: the index first when sharded, then the
  // opened files by name (not a partial GGUF file), then the parts' (in
  // the order of parts(): with kAll every part, with kNeeded those of a
  // partial GGUF file). A GGUF header that hashes otherwise
  // than when it was parsed is a Mismatch (the file changed). Memory beyond the sinks' own: at most
  // 2 * threads + 2 buffers of at most 4 MiB (2 * threads + 16 where files
  // are hashed together). Errors name the file (truncated, unreadable);
  // Invalid when two sinks share bytes or a sink's tensor is not in an
  // opened file. After an error the sinks may have received part of their
  // bytes.
  Result<std::vector<FileDigest>> ReadAll(std::span<const TensorSink> sinks, int threads,
                                          Parts which = Parts::kNeeded) const;
  // ReadAll with no sinks: only the digests.
  Result<std::vector<FileDigest>> HashFiles(int threads, Parts which = Parts::kNeeded) const {
    return ReadAll({}, threads, which);
  }
  // Whether ReadAll hashes every weight file whole (every shard opened, not
  // a partial GGUF file): then WeightsSha256 applies.
  bool hashes_whole() const { return !partial_ && files_.size() == file_names_.size(); }
  // weights_sha256 from HashFiles' result. REQUIRES hashes_whole().
  static Digest WeightsSha256(const std::vector<FileDigest>& digests, bool sharded);

  // Mismatch naming the first opened file rewritten since Open.
  Status CheckUnchanged() const;

  // A name a message can use for the whole checkpoint (the path opened).
  const std::string& path() const { return path_; }

 private:
  Checkpoint() = default;
  static Result<Checkpoint> OpenGguf(const std::string& path, const Filter& filter);

  std::string path_;
  std::string dir_;
  bool sharded_ = false;
  bool gguf_ = false;
  bool partial_ = false;
  Digest index_sha256_{};  // of the index bytes parsed, sharded only
  std::vector<std::string> file_names_;
  std::vector<std::unique_ptr<TensorFile>> files_;  // opened ones
  std::map<std::string, TensorRef, std::less<>> tensors_;
  // GGUF only.
  ModelConfig gguf_config_;
  std::vector<TensorInfo> gguf_tensors_;  // what tensors_ points into
  std::vector<DigestRange> parts_;
  Digest gguf_header_sha256_{};  // of the header as parsed
};

}  // namespace lockstep
