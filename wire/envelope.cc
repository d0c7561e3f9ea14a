#include "wire/envelope.h"

#include <cstring>
#include <string>

#include <kj/exception.h>
#include <kj/io.h>

namespace lockstep::wire {
namespace {

constexpr size_t kWordBytes = sizeof(capnp::word);
static_assert(kWordBytes == 8);

// Frame header: segment count minus one (must be 0), then segment 0's size
// in words; both little-endian u32.
constexpr size_t kHeaderBytes = 8;

uint32_t LoadU32Le(const uint8_t* p) {
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
         uint32_t{p[3]} << 24;
}

void StoreU32Le(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}

// Checks sizes and the segment table without touching capnp.
Status CheckFraming(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  if (bytes.size() > limits.max_frame_bytes) {
    return InvalidError("frame of " + std::to_string(bytes.size()) +
                        " bytes exceeds the limit of " +
                        std::to_string(limits.max_frame_bytes));
  }
  if (bytes.size() < kHeaderBytes + kWordBytes) {
    return CorruptError("frame truncated: " + std::to_string(bytes.size()) +
                        " bytes");
  }
  if (bytes.size() % kWordBytes != 0) {
    return CorruptError("frame length " + std::to_string(bytes.size()) +
                        " is not a whole number of words");
  }
  if (LoadU32Le(bytes.data()) != 0) {
    return CorruptError("frame has more than one segment");
  }
  const uint64_t words = LoadU32Le(bytes.data() + 4);
  if (words * kWordBytes != bytes.size() - kHeaderBytes) {
    return CorruptError("frame segment size " + std::to_string(words) +
                        " words disagrees with frame length " +
                        std::to_string(bytes.size()));
  }
  return Status::Ok();
}

capnp::ReaderOptions ReaderOptionsFor(size_t frame_bytes,
                                      const DecodeLimits& limits) {
  capnp::ReaderOptions options;
  // Canonical frames cannot alias, so a validation pass plus one read of
  // every field stays under a few times the frame size.
  options.traversalLimitInWords = 4 * (frame_bytes / kWordBytes) + 64;
  options.nestingLimit = limits.nesting_limit;
  return options;
}

}  // namespace

ParsedEnvelope::ParsedEnvelope(ParsedEnvelope&&) noexcept = default;
ParsedEnvelope& ParsedEnvelope::operator=(ParsedEnvelope&&) noexcept = default;
ParsedEnvelope::~ParsedEnvelope() = default;

Result<ParsedEnvelope> ParseEnvelope(std::span<const uint8_t> bytes,
                                     const DecodeLimits& limits) {
  LOCKSTEP_RETURN_IF_ERROR(CheckFraming(bytes, limits));
  ParsedEnvelope parsed;
  const capnp::word* words = reinterpret_cast<const capnp::word*>(bytes.data());
  const size_t word_count = bytes.size() / kWordBytes;
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(capnp::word) != 0) {
    parsed.aligned_copy_ = kj::heapArray<capnp::word>(word_count);
    std::memcpy(parsed.aligned_copy_.begin(), bytes.data(), bytes.size());
    words = parsed.aligned_copy_.begin();
  }
  try {
    parsed.reader_ = std::make_unique<capnp::FlatArrayMessageReader>(
        kj::ArrayPtr<const capnp::word>(words, word_count),
        ReaderOptionsFor(bytes.size(), limits));
    if (parsed.reader_->getEnd() != words + word_count) {
      return CorruptError("frame has trailing bytes");
    }
    if (!parsed.reader_->isCanonical()) {
      return CorruptError("frame is not in canonical form");
    }
    parsed.root_ = parsed.reader_->getRoot<schema::Envelope>();
    const uint32_t version = parsed.root_.getVersion();
    if (version != kProtocolVersion) {
      return InvalidError("protocol version " + std::to_string(version) +
                          " is not supported (expected " +
                          std::to_string(kProtocolVersion) + ")");
    }
  } catch (const kj::Exception& e) {
    return CorruptError(std::string("malformed frame: ") +
                        e.getDescription().cStr());
  }
  return parsed;
}

namespace internal {

void WriteFrameHeader(Frame& frame, size_t words) {
  StoreU32Le(frame.data(), 0);
  StoreU32Le(frame.data() + 4, static_cast<uint32_t>(words));
}

bool IsExactCanonical(capnp::MessageBuilder& message, size_t words) {
  auto segments = message.getSegmentsForOutput();
  if (segments.size() != 1 || segments[0].size() != words) return false;
  // Checked on a reader over the built segment: the builder's own
  // isCanonical() canonicalises a copy (allocating), the reader's walks
  // the words in place (a worker's per-step frames must not allocate).
  // The reader's limits must not refuse what we built (a long prefill's
  // frame is larger than the default traversal limit); any refusal means
  // "not known canonical", and the caller takes the copying path.
  capnp::ReaderOptions options;
  options.traversalLimitInWords = 4 * words + 64;
  try {
    capnp::SegmentArrayMessageReader reader(segments, options);
    return reader.isCanonical();
  } catch (const kj::Exception&) {
    return false;
  }
}

}  // namespace internal

Frame MarshalEnvelope(capnp::MessageBuilder& message) {
  auto root = message.getRoot<schema::Envelope>();
  root.setVersion(kProtocolVersion);
  kj::Array<capnp::word> canonical = capnp::canonicalize(root.asReader());
  const size_t body = canonical.size() * kWordBytes;
  Frame frame(kHeaderBytes + body);
  internal::WriteFrameHeader(frame, canonical.size());
  std::memcpy(frame.data() + kHeaderBytes, canonical.begin(), body);
  return frame;
}

const char* EnvelopeKindName(schema::Envelope::Which which) {
  using W = schema::Envelope::Which;
  switch (which) {
    case W::HELLO: return "hello";
    case W::ASSIGN: return "assign";
    case W::ASSIGN_ACK: return "assignAck";
    case W::SESSION_OPEN: return "sessionOpen";
    case W::PREFILL: return "prefill";
    case W::DECODE: return "decode";
    case W::HIDDEN: return "hidden";
    case W::LOGITS: return "logits";
    case W::EVICT: return "evict";
    case W::FORK: return "fork";
    case W::RELEASE: return "release";
    case W::HEARTBEAT: return "heartbeat";
    case W::ERROR: return "error";
    case W::SHUTDOWN: return "shutdown";
    case W::STEP_RESULT: return "stepResult";
  }
  return "unknown";
}

}  // namespace lockstep::wire
