// Codecs for the two tensor-carrying messages: HiddenFrame (stage k ->
// stage k+1) and Logits (last stage -> coordinator).
//
// Bit exactness: float payloads are copied as bytes (little-endian
// IEEE-754 binary32 on the wire) and never pass through float arithmetic,
// so signed zeros, every NaN payload (quiet or signalling), infinities and
// subnormals survive a round trip unchanged.
//
// Integrity: each frame carries a SHA-256 digest over its header fields and
// payload (docs/wire_protocol.md, "Frame digests"); decoders recompute it
// and return Corrupt on a mismatch. Digests also let the pipeline prove a
// split changed nothing.
//
// Thread-safety: all functions are thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "base/sha256.h"
#include "base/status.h"
#include "wire/envelope.h"

namespace lockstep::wire {

// The witness chain travelling to the last stage with a step (schema
// ChainHandoff): that stage chooses the token and returns a StepResult.
struct ChainHandoff {
  uint32_t decode_step = 0;  // the step's index for sampling
  Sha256State chain_state;   // validated by the decoders (Sha256State::Parse)
  uint32_t relay = 0;        // steps the pipeline runs after this one by itself
  bool operator==(const ChainHandoff&) const = default;
};

struct HiddenFrame {
  uint64_t session_id = 0;
  uint32_t step = 0;
  uint32_t first_position = 0;  // position of row 0 in the sequence
  uint32_t seq = 0;             // rows (positions), > 0
  uint32_t hidden = 0;          // model width, > 0
  uint32_t resume_layer = 0;    // first layer the receiver runs
  std::vector<float> payload;   // [seq][hidden] fp32 residual stream
  std::optional<ChainHandoff> handoff;  // carried on to the last stage
  bool no_output = false;               // carried on: the last stage replies nothing
  std::vector<Digest> layer_digests;    // traced: layers [0, resume_layer) (per step row
                                        // of a multi-row step); else empty
  uint16_t step_rows = 0;               // carried on: a multi-row step's step rows (0: none)
};

struct Logits {
  uint64_t session_id = 0;
  uint32_t step = 0;
  uint32_t vocab = 0;           // > 0
  std::vector<float> payload;   // [vocab] fp32 logits of the last position
  std::vector<Digest> layer_digests;  // traced: one per model layer; else empty
};

// SHA-256 of the frame's header fields and payload bytes as defined in
// docs/wire_protocol.md. REQUIRES: payload.size() == seq * hidden (resp.
// vocab); the encoders assert this.
Digest HiddenFrameDigest(const HiddenFrame& frame);
Digest LogitsDigest(const Logits& logits);

// REQUIRES: frame.payload.size() == frame.seq * frame.hidden, both > 0.
Frame MarshalHidden(const HiddenFrame& frame);
// The same bytes into *out, reusing its storage (no allocation when its
// capacity holds the frame).
void MarshalHidden(const HiddenFrame& frame, Frame* out);
// Errors: see ParseEnvelope; Invalid if the envelope is not a hidden frame;
// Corrupt on zero or overflowing dims, a payload that is not
// seq * hidden * 4 bytes, a digest of the wrong size, or
// "hidden frame digest mismatch (session S step T)", a handoff whose
// chain state is not a consistent 108-byte state, layer digests that
// are not a whole number of 32-byte digests, or step rows that contradict
// the frame (CheckStepRowsShape).
Result<HiddenFrame> UnmarshalHidden(std::span<const uint8_t> bytes,
                                    const DecodeLimits& limits = {});

// A multi-row step's shape as the wire allows it (docs/wire_protocol.md,
// "Multi-row steps"): step rows only with a chain handoff that relays
// nothing, never on a relayed step, and at most the rows fed. Corrupt
// naming `what` otherwise; Ok for step_rows 0.
Status CheckStepRowsShape(uint16_t step_rows, const std::optional<ChainHandoff>& handoff,
                          bool relayed, size_t rows, const std::string& what);

// REQUIRES: logits.payload.size() == logits.vocab > 0.
Frame MarshalLogits(const Logits& logits);
// Errors as UnmarshalHidden, for "logits digest mismatch (session S step T)".
Result<Logits> UnmarshalLogits(std::span<const uint8_t> bytes,
                               const DecodeLimits& limits = {});

}  // namespace lockstep::wire
