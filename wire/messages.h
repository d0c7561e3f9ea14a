// Plain C++ forms of every protocol message (wire/lockstep.capnp), so that
// the coordinator and workers never touch capnp builders or readers.
//
// MarshalMessage/ParseMessage go through the same hardened framing as
// wire/envelope.h; HiddenFrame and Logits carry and verify their digests
// exactly as wire/hidden_frame.h does. Field meanings are documented in the
// schema. Values are plain data: copyable, thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "wire/envelope.h"
#include "wire/hidden_frame.h"

namespace lockstep::wire {

struct Hello {
  std::string worker_id;
  uint32_t protocol_version = kProtocolVersion;
  Digest weights_sha256{};
  Digest config_sha256{};
  Digest tokenizer_sha256{};
  Digest table_digest{};
  Digest inv_freq_table_digest{};
  std::string isa;
};

// One weight file of a checkpoint by its name in the model folder.
struct WeightFile {
  std::string name;
  Digest sha256{};
  bool operator==(const WeightFile&) const = default;
};

struct Assign {
  std::string model_dir;
  Digest expected_weights_sha256{};
  Digest expected_config_sha256{};
  Digest expected_tokenizer_sha256{};
  uint32_t layer_lo = 0;  // layers [layer_lo, layer_hi)
  uint32_t layer_hi = 0;
  bool is_first = false;
  bool is_last = false;
  std::string next_hop;  // endpoint of the next stage; empty when is_last
  uint32_t worker_index = 0;
  std::string next_hop_key;  // Z85 CURVE key pinned for next_hop ("" = plaintext/none)
  std::string upstream_key;  // Z85 CURVE key of the previous stage ("" = none)
  std::vector<WeightFile> weight_files;  // sharded: the files this stage reads; else empty
  std::string ring_hop;           // last of >= 2 stages: the first stage's endpoint; else ""
  std::string ring_hop_key;       // Z85 CURVE key pinned for ring_hop ("" = plaintext/none)
  std::string ring_upstream_key;  // first of >= 2 stages: the last stage's key ("" = none)
};

// The worker's "ready" reply to Assign.
struct AssignAck {
  uint32_t worker_index = 0;
  uint32_t layer_lo = 0;
  uint32_t layer_hi = 0;
  uint64_t resident_bytes = 0;  // VmRSS after loading; 0 = unknown
};

struct WindowSpec {
  enum class Kind { kFull, kGlobal, kPerLayer };
  Kind kind = Kind::kFull;
  uint32_t global = 0;             // W when kind == kGlobal
  std::vector<uint32_t> per_layer;  // [layers] W when kind == kPerLayer
};

// A session's sampling parameters as they travel: floats as their bits
// (the engine's SamplingParams, which wire/ cannot name). Default: greedy.
struct Sampling {
  uint32_t temperature_bits = 0;
  uint32_t top_k = 0;
  uint32_t top_p_bits = 0x3f800000;  // 1.0f
  uint64_t seed = 0;
  bool operator==(const Sampling&) const = default;
};

struct SessionOpen {
  uint64_t session_id = 0;
  WindowSpec window;
  Sampling sampling;
  bool trace = false;  // stages report per-layer digests (layer_digests)
  uint32_t reserve_positions = 0;  // cache entries to reserve up front (a hint)
};

// Token input to the first stage; `phase` selects the envelope member.
struct TokenInput {
  enum class Phase { kPrefill, kDecode };
  Phase phase = Phase::kDecode;
  uint64_t session_id = 0;
  uint32_t step = 0;
  uint32_t first_position = 0;
  std::vector<uint32_t> token_ids;  // [positions]
  std::optional<ChainHandoff> handoff;  // set: the last stage returns a StepResult
  bool no_output = false;  // set: the last stage replies nothing (never with a handoff)
  bool relayed = false;    // sent by the last stage as the next step of a relay
  uint16_t step_rows = 0;  // > 0: a multi-row step, its last step_rows rows steps (with a handoff)
};

// MarshalMessage(m)'s bytes into *out, reusing its storage (no allocation
// when its capacity holds the frame): the last stage's relayed step.
void MarshalTokenInput(const TokenInput& m, Frame* out);

// One step row's outcome after the first, in a multi-row step's StepResult.
struct RowOutcome {
  uint32_t token = 0;
  Digest logits_sha256{};
  Sha256State chain_state;  // the chain after this row's logits || token
  bool operator==(const RowOutcome&) const = default;
};
inline constexpr size_t kRowOutcomeBytes = 4 + 32 + Sha256State::kBytes;  // on the wire

// The last stage's answer to a step that carried a ChainHandoff.
struct StepResult {
  uint64_t session_id = 0;
  uint32_t step = 0;           // echoes TokenInput::step
  uint32_t token = 0;          // the coordinator checks it against the vocab
  Digest logits_sha256{};      // sha256 of the step's logits bytes
  Sha256State chain_state;     // the chain after logits || token
  std::vector<Digest> layer_digests;  // traced: one per model layer (per step row); else empty
  std::vector<RowOutcome> later_rows;  // a multi-row step: rows 1 .. R-1; else empty
};

// SHA-256 over "lockstep.step.v1", the session (u64 LE), step, token (u32
// LE), logits_sha256 and chain_state bytes, then any layer digests (tagged
// "layers", counted), then any later rows (tagged "rows", counted, each
// token u32 LE, logits sha256, chain state): the StepResult's frame digest.
Digest StepResultDigest(const StepResult& r);
// MarshalMessage(r)'s bytes into *out, reusing its storage (no allocation
// when its capacity holds the frame): the last stage's per-step reply.
void MarshalStepResult(const StepResult& r, Frame* out);

struct Evict {
  uint64_t session_id = 0;
  uint32_t from = 0;
  uint32_t count = 0;
};

struct Fork {
  uint64_t new_session_id = 0;
  uint64_t source_session_id = 0;
  uint32_t reserve_positions = 0;  // cache entries to reserve for the copy (a hint)
};

struct Release {
  uint64_t session_id = 0;
};

struct Heartbeat {
  uint64_t sequence = 0;
  std::string sender;
  uint64_t compute_nanos = 0;  // a worker's reply: its stage's compute time so far
  uint64_t bytes_to_next = 0;  // a worker's reply: bytes sent to the next stage so far
};

// A failed request, as reported to a peer. `kind` is never kOk.
struct ErrorReport {
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  bool has_session = false;
  uint64_t session_id = 0;  // meaningful only when has_session

  Status ToStatus() const { return Status(kind, message); }
  // The one way to report a failure: `who` (e.g. "worker W stage K layers
  // [lo,hi)") prefixes the message; an Ok status is reported as Internal.
  static ErrorReport From(const Status& st, const std::string& who,
                          std::optional<uint64_t> session) {
    return ErrorReport{st.kind() == ErrorKind::kOk ? ErrorKind::kInternal : st.kind(),
                       who + ": " + st.message(), session.has_value(), session.value_or(0)};
  }
};

struct Shutdown {
  std::string reason;
};

using Message = std::variant<Hello, Assign, AssignAck, SessionOpen, TokenInput,
                             HiddenFrame, Logits, Evict, Fork, Release,
                             Heartbeat, ErrorReport, Shutdown, StepResult>;

// Envelope member name of a message ("hello", "prefill", "hidden", ...).
const char* MessageName(const Message& message);

// REQUIRES: HiddenFrame/Logits payloads match their dims (see
// hidden_frame.h); ErrorReport::kind != kOk.
Frame MarshalMessage(const Message& message);

// Errors: see ParseEnvelope and UnmarshalHidden; Corrupt if a digest field
// is not 32 bytes, a chain state is not a consistent 108-byte state (a
// later row's too), step rows contradict the TokenInput (CheckStepRowsShape), a
// StepResult's digest does not match, or an error kind is out of range;
// Invalid for an envelope member this build does not know.
Result<Message> ParseMessage(std::span<const uint8_t> bytes,
                             const DecodeLimits& limits = {});

// For a frame ParseMessage refused: the session it still names, when its
// envelope parses and it is a hidden frame, logits or a step result (a flipped bit
// fails only the digest check), so the receiver can fail just that session.
// nullopt when the frame names no session.
std::optional<uint64_t> SessionOfRefusedFrame(std::span<const uint8_t> bytes,
                                              const DecodeLimits& limits = {});

}  // namespace lockstep::wire
