// Envelope framing: turns one `schema::Envelope` (wire/lockstep.capnp) into
// the bytes of one ZeroMQ message and back, with a hardened decoder.
//
// Frame bytes = Cap'n Proto single-segment serialisation of the envelope in
// canonical form: [u32 0][u32 words] followed by `words` 8-byte words. The
// decoder refuses, before reading any field: frames above
// DecodeLimits::max_frame_bytes, lengths that are not whole words, segment
// tables that disagree with the length, trailing bytes, non-canonical
// encodings (so no bit of a frame is "don't care"), envelopes nested deeper
// than the limit, and envelopes whose version is not kProtocolVersion.
//
// Most callers want wire/messages.h (plain structs) or wire/hidden_frame.h;
// this header is for code that builds or reads capnp directly.
//
// Thread-safety: free functions are thread-safe; a ParsedEnvelope is
// thread-compatible (one reader at a time).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <capnp/message.h>
#include <kj/array.h>
#include <capnp/serialize.h>

#include "base/status.h"
#include "wire/lockstep.capnp.h"

namespace lockstep::wire {

inline constexpr uint32_t kProtocolVersion = 2;
static_assert(kProtocolVersion == schema::PROTOCOL_VERSION,
              "kProtocolVersion must match lockstep.capnp");

// The bytes of one frame as produced by the encoders. std::vector's storage
// comes from operator new, which is suitably aligned for capnp words on
// every platform we build for; decoders still check and copy if not.
using Frame = std::vector<uint8_t>;

struct DecodeLimits {
  // Frames longer than this are refused before parsing. 64 MiB holds a
  // hidden frame of 8192 positions x 2048 floats.
  size_t max_frame_bytes = size_t{64} << 20;
  // Cap'n Proto nesting limit; the schema needs 4 levels.
  int nesting_limit = 8;
};

// A decoded envelope: owns an aligned copy of the frame when the input was
// misaligned, otherwise views the caller's bytes.
// Lifetime: the bytes passed to ParseEnvelope must outlive this object.
// Move-only.
class ParsedEnvelope {
 public:
  ParsedEnvelope(ParsedEnvelope&&) noexcept;
  ParsedEnvelope& operator=(ParsedEnvelope&&) noexcept;
  ~ParsedEnvelope();

  // Valid while *this lives. The structure is validated, but capnp field
  // accessors still throw kj::Exception when a pointer's type contradicts
  // the schema (e.g. a struct where Data is expected): catch kj::Exception
  // around reads, as ParseMessage and the Unmarshal functions do.
  schema::Envelope::Reader root() const { return root_; }
  schema::Envelope::Which which() const { return root_.which(); }

 private:
  friend Result<ParsedEnvelope> ParseEnvelope(std::span<const uint8_t>,
                                              const DecodeLimits&);
  ParsedEnvelope() = default;

  kj::Array<capnp::word> aligned_copy_;  // empty when reading in place
  std::unique_ptr<capnp::FlatArrayMessageReader> reader_;
  schema::Envelope::Reader root_;
};

// Validates framing, canonical form and version (see the file comment).
// Errors: Invalid (too big, wrong version), Corrupt (anything malformed).
Result<ParsedEnvelope> ParseEnvelope(std::span<const uint8_t> bytes,
                                     const DecodeLimits& limits = {});

// Sets the root envelope's version to kProtocolVersion and returns the
// canonical frame bytes. REQUIRES: `message` has an Envelope root.
Frame MarshalEnvelope(capnp::MessageBuilder& message);

// Fast path for large messages whose canonical size is known: builds the
// envelope with `fill(schema::Envelope::Builder)` directly inside the frame
// (one allocation, no canonicalising copy) when `words` is exactly the
// canonical size in words, else falls back to MarshalEnvelope. The output
// is identical either way.
template <typename Fill>
Frame MarshalEnvelopeInPlace(size_t words, Fill&& fill);
// The same into *out, reusing its storage: no allocation when its capacity
// already holds the frame (a worker's per-step frames, wire/frame_pool.h).
template <typename Fill>
void MarshalEnvelopeInPlace(size_t words, Fill&& fill, Frame* out);

// Canonical sizes, in words, for MarshalEnvelopeInPlace: an envelope whose
// member is a struct T (root pointer, Envelope, T), and a blob of `bytes`
// (Data pads to a word). A message's size is EnvelopeWords<T>() plus the
// sizes of whatever T points to, in any order.
template <typename T>
inline size_t EnvelopeWords() {
  return 1 + capnp::sizeInWords<schema::Envelope>() + capnp::sizeInWords<T>();
}
inline constexpr size_t BlobWords(size_t bytes) { return (bytes + 7) / 8; }

namespace internal {
// Writes the frame header for a `words`-word segment 0 into frame[0..8).
void WriteFrameHeader(Frame& frame, size_t words);
bool IsExactCanonical(capnp::MessageBuilder& message, size_t words);
}  // namespace internal

template <typename Fill>
void MarshalEnvelopeInPlace(size_t words, Fill&& fill, Frame* out) {
  out->assign(8 + words * sizeof(capnp::word), 0);  // zeroed, as capnp requires
  {
    // operator new storage is aligned for capnp::word (8 <= 16).
    capnp::FlatMessageBuilder message(kj::arrayPtr(
        reinterpret_cast<capnp::word*>(out->data() + 8), words));
    auto root = message.initRoot<schema::Envelope>();
    root.setVersion(kProtocolVersion);
    fill(root);
    if (internal::IsExactCanonical(message, words)) {
      internal::WriteFrameHeader(*out, words);
      return;
    }
  }
  capnp::MallocMessageBuilder message(words + 16);
  fill(message.initRoot<schema::Envelope>());
  *out = MarshalEnvelope(message);
}

template <typename Fill>
Frame MarshalEnvelopeInPlace(size_t words, Fill&& fill) {
  Frame frame;
  MarshalEnvelopeInPlace(words, std::forward<Fill>(fill), &frame);
  return frame;
}

// Human-readable name of an envelope's union member ("hidden", "logits").
const char* EnvelopeKindName(schema::Envelope::Which which);

}  // namespace lockstep::wire
