#include "wire/hidden_frame.h"

#include <bit>
#include <cassert>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>

#include <capnp/message.h>

#include "wire/tensor_codec.h"

namespace lockstep::wire {
namespace {

using internal::DigestData;

// Payloads are memcpy'd between float storage and the little-endian wire
// format; a big-endian port would swap bytes here, as bytes.
static_assert(std::endian::native == std::endian::little,
              "the wire codec assumes a little-endian host");
static_assert(sizeof(float) == 4 && std::numeric_limits<float>::is_iec559);

constexpr std::string_view kHiddenTag = "lockstep.hidden.v1";
constexpr std::string_view kLogitsTag = "lockstep.logits.v1";

std::span<const uint8_t> AsBytes(std::span<const float> floats) {
  return {reinterpret_cast<const uint8_t*>(floats.data()), floats.size_bytes()};
}

void UpdateU64Le(Sha256Stream& s, uint64_t v) {
  s.UpdateU32Le(static_cast<uint32_t>(v));
  s.UpdateU32Le(static_cast<uint32_t>(v >> 32));
}

void UpdateTag(Sha256Stream& s, std::string_view tag) {
  s.Update({reinterpret_cast<const uint8_t*>(tag.data()), tag.size()});
}

Digest HiddenDigestOf(const HiddenFrame& h, std::span<const uint8_t> payload) {
  Sha256Stream s;
  UpdateTag(s, kHiddenTag);
  UpdateU64Le(s, h.session_id);
  s.UpdateU32Le(h.step);
  s.UpdateU32Le(h.first_position);
  s.UpdateU32Le(h.seq);
  s.UpdateU32Le(h.hidden);
  s.UpdateU32Le(h.resume_layer);
  s.Update(payload);
  if (h.handoff) {  // the payload's length is fixed by the header: no ambiguity
    s.UpdateU32Le(h.handoff->decode_step);
    s.Update(h.handoff->chain_state.bytes);
    if (h.handoff->relay > 0) {  // 'R' and the count: no other form has that tag there
      const uint8_t r = 'R';
      s.Update({&r, 1});
      s.UpdateU32Le(h.handoff->relay);
    }
    if (h.step_rows > 0) {  // only with a handoff of relay 0: 'M' where 'R' would be
      const uint8_t m = 'M';
      s.Update({&m, 1});
      s.UpdateU32Le(h.step_rows);
    }
  }
  if (h.no_output) {  // one byte after the payload: no other form has that length
    const uint8_t n = 'N';
    s.Update({&n, 1});
  }
  internal::HashLayerDigests(s, h.layer_digests);
  return s.Finalize();
}

Digest LogitsDigestOf(const Logits& l, std::span<const uint8_t> payload) {
  Sha256Stream s;
  UpdateTag(s, kLogitsTag);
  UpdateU64Le(s, l.session_id);
  s.UpdateU32Le(l.step);
  s.UpdateU32Le(l.vocab);
  s.Update(payload);
  internal::HashLayerDigests(s, l.layer_digests);
  return s.Finalize();
}

// Checks that a blob holds exactly rows * cols fp32 words; `what` names
// the frame in errors.
Status CheckPayloadSize(uint32_t rows, uint32_t cols, size_t payload_bytes,
                        const std::string& what) {
  if (rows == 0 || cols == 0) {
    return CorruptError(what + " has a zero dimension (" + std::to_string(rows) +
                        " x " + std::to_string(cols) + ")");
  }
  // rows * cols < 2^64; * 4 may not be, so compare in elements.
  const uint64_t elements = uint64_t{rows} * cols;
  if (payload_bytes % 4 != 0 || payload_bytes / 4 != elements) {
    return CorruptError(what + " payload is " + std::to_string(payload_bytes) +
                        " bytes, expected " + std::to_string(rows) + " x " +
                        std::to_string(cols) + " fp32 words");
  }
  return Status::Ok();
}

Status CheckDigest(capnp::Data::Reader got, const Digest& want,
                   const std::string& what, uint64_t session, uint32_t step) {
  const std::string where =
      " (session " + std::to_string(session) + " step " + std::to_string(step) + ")";
  if (got.size() != want.size()) {
    return CorruptError(what + " digest is " + std::to_string(got.size()) +
                        " bytes, expected 32" + where);
  }
  if (std::memcmp(got.begin(), want.data(), want.size()) != 0) {
    return CorruptError(what + " digest mismatch" + where);
  }
  return Status::Ok();
}

std::vector<float> CopyFloats(capnp::Data::Reader bytes) {
  std::vector<float> out(bytes.size() / 4);
  std::memcpy(out.data(), bytes.begin(), bytes.size());
  return out;
}

// Canonical size of an envelope holding struct T with a payload blob and a
// 32-byte digest blob: root pointer, Envelope, T, payload, digest.
template <typename T>
size_t CanonicalWords(size_t payload_floats) {
  return EnvelopeWords<T>() + BlobWords(payload_floats * 4) + BlobWords(32);
}

// The words layer digests add (a blob of 32-byte digests).
size_t LayerDigestWords(const std::vector<Digest>& d) { return BlobWords(d.size() * 32); }

}  // namespace

namespace internal {

size_t HandoffWords(const std::optional<ChainHandoff>& h) {
  if (!h) return 0;
  return capnp::sizeInWords<schema::ChainHandoff>() + BlobWords(Sha256State::kBytes);
}

constexpr std::string_view kLayersTag = "layers";

void WriteLayerDigests(const std::vector<Digest>& digests, capnp::Data::Builder out) {
  for (size_t i = 0; i < digests.size(); ++i) {
    std::memcpy(out.begin() + i * 32, digests[i].data(), 32);
  }
}

Result<std::vector<Digest>> ReadLayerDigests(capnp::Data::Reader in, const std::string& what) {
  if (in.size() % 32 != 0) {
    return CorruptError(what + " layer digests are " + std::to_string(in.size()) +
                        " bytes, not a whole number of 32-byte digests");
  }
  std::vector<Digest> out(in.size() / 32);
  for (size_t i = 0; i < out.size(); ++i) std::memcpy(out[i].data(), in.begin() + i * 32, 32);
  return out;
}

void HashLayerDigests(Sha256Stream& s, const std::vector<Digest>& digests) {
  if (digests.empty()) return;
  UpdateTag(s, kLayersTag);
  s.UpdateU32Le(static_cast<uint32_t>(digests.size()));
  for (const Digest& d : digests) s.Update(d);
}

void WriteHandoff(const ChainHandoff& h, schema::ChainHandoff::Builder out) {
  out.setDecodeStep(h.decode_step);
  out.setChainState(capnp::Data::Reader(h.chain_state.bytes.data(), h.chain_state.bytes.size()));
  out.setRelay(h.relay);
}

Result<std::optional<ChainHandoff>> ReadHandoff(bool has, schema::ChainHandoff::Reader in,
                                                const std::string& what) {
  if (!has) return std::optional<ChainHandoff>();
  const capnp::Data::Reader state = in.getChainState();
  Result<Sha256State> parsed = Sha256State::Parse({state.begin(), state.size()});
  if (!parsed.ok()) return parsed.status().WithContext(what + " chain handoff");
  return std::optional<ChainHandoff>(ChainHandoff{in.getDecodeStep(), *parsed, in.getRelay()});
}

void WriteHidden(const HiddenFrame& h, schema::HiddenFrame::Builder out) {
  assert(h.seq > 0 && h.hidden > 0);
  assert(h.payload.size() == uint64_t{h.seq} * h.hidden);
  out.setSessionId(h.session_id);
  out.setStep(h.step);
  out.setFirstPosition(h.first_position);
  out.setSeq(h.seq);
  out.setHidden(h.hidden);
  out.setResumeLayer(h.resume_layer);
  const auto bytes = AsBytes(h.payload);
  std::memcpy(out.initPayload(bytes.size()).begin(), bytes.data(), bytes.size());
  out.setDigest(DigestData(HiddenDigestOf(h, bytes)));
  if (h.handoff) WriteHandoff(*h.handoff, out.initHandoff());
  out.setNoOutput(h.no_output);
  out.setStepRows(h.step_rows);
  // Always set (empty when untraced): the last pointer is then never null,
  // so the frame built in place is already canonical (no copy, no allocation).
  WriteLayerDigests(h.layer_digests, out.initLayerDigests(h.layer_digests.size() * 32));
}

Result<HiddenFrame> ReadHidden(schema::HiddenFrame::Reader in) {
  HiddenFrame h;
  h.session_id = in.getSessionId();
  h.step = in.getStep();
  h.first_position = in.getFirstPosition();
  h.seq = in.getSeq();
  h.hidden = in.getHidden();
  h.resume_layer = in.getResumeLayer();
  const capnp::Data::Reader payload = in.getPayload();
  LOCKSTEP_RETURN_IF_ERROR(
      CheckPayloadSize(h.seq, h.hidden, payload.size(), "hidden frame"));
  LOCKSTEP_ASSIGN_OR_RETURN(h.handoff,
                            ReadHandoff(in.hasHandoff(), in.getHandoff(), "hidden frame"));
  h.no_output = in.getNoOutput();
  if (h.no_output && h.handoff) return CorruptError("hidden frame: noOutput with a chain handoff");
  h.step_rows = in.getStepRows();
  LOCKSTEP_RETURN_IF_ERROR(CheckStepRowsShape(h.step_rows, h.handoff, false, h.seq, "hidden frame"));
  LOCKSTEP_ASSIGN_OR_RETURN(h.layer_digests,
                            ReadLayerDigests(in.getLayerDigests(), "hidden frame"));
  const Digest want = HiddenDigestOf(h, {payload.begin(), payload.size()});
  LOCKSTEP_RETURN_IF_ERROR(
      CheckDigest(in.getDigest(), want, "hidden frame", h.session_id, h.step));
  h.payload = CopyFloats(payload);
  return h;
}

void WriteLogits(const Logits& l, schema::Logits::Builder out) {
  assert(l.vocab > 0 && l.payload.size() == l.vocab);
  out.setSessionId(l.session_id);
  out.setStep(l.step);
  out.setVocab(l.vocab);
  const auto bytes = AsBytes(l.payload);
  std::memcpy(out.initPayload(bytes.size()).begin(), bytes.data(), bytes.size());
  out.setDigest(DigestData(LogitsDigestOf(l, bytes)));
  // Always set (empty when untraced): the last pointer is then never null,
  // so the frame built in place is already canonical (no copy, no allocation).
  WriteLayerDigests(l.layer_digests, out.initLayerDigests(l.layer_digests.size() * 32));
}

Result<Logits> ReadLogits(schema::Logits::Reader in) {
  Logits l;
  l.session_id = in.getSessionId();
  l.step = in.getStep();
  l.vocab = in.getVocab();
  const capnp::Data::Reader payload = in.getPayload();
  LOCKSTEP_RETURN_IF_ERROR(CheckPayloadSize(1, l.vocab, payload.size(), "logits"));
  LOCKSTEP_ASSIGN_OR_RETURN(l.layer_digests, ReadLayerDigests(in.getLayerDigests(), "logits"));
  const Digest want = LogitsDigestOf(l, {payload.begin(), payload.size()});
  LOCKSTEP_RETURN_IF_ERROR(
      CheckDigest(in.getDigest(), want, "logits", l.session_id, l.step));
  l.payload = CopyFloats(payload);
  return l;
}

}  // namespace internal

Digest HiddenFrameDigest(const HiddenFrame& frame) {
  assert(frame.payload.size() == uint64_t{frame.seq} * frame.hidden);
  return HiddenDigestOf(frame, AsBytes(frame.payload));
}

Digest LogitsDigest(const Logits& logits) {
  assert(logits.payload.size() == logits.vocab);
  return LogitsDigestOf(logits, AsBytes(logits.payload));
}

void MarshalHidden(const HiddenFrame& frame, Frame* out) {
  MarshalEnvelopeInPlace(
      CanonicalWords<schema::HiddenFrame>(frame.payload.size()) +
          internal::HandoffWords(frame.handoff) +
          LayerDigestWords(frame.layer_digests),
      [&frame](schema::Envelope::Builder root) {
        internal::WriteHidden(frame, root.initHidden());
      },
      out);
}

Status CheckStepRowsShape(uint16_t step_rows, const std::optional<ChainHandoff>& handoff,
                          bool relayed, size_t rows, const std::string& what) {
  if (step_rows == 0) return Status::Ok();
  const std::string head = what + ": a multi-row step of " + std::to_string(step_rows) + " step rows";
  if (!handoff) return CorruptError(head + " without a chain handoff");
  if (handoff->relay > 0) return CorruptError(head + " asks for relayed steps");
  if (relayed) return CorruptError(head + " sent as a relayed step");
  if (step_rows > rows) return CorruptError(head + " feeds only " + std::to_string(rows) + " rows");
  return Status::Ok();
}

Frame MarshalHidden(const HiddenFrame& frame) {
  Frame out;
  MarshalHidden(frame, &out);
  return out;
}

Result<HiddenFrame> UnmarshalHidden(std::span<const uint8_t> bytes,
                                    const DecodeLimits& limits) {
  LOCKSTEP_ASSIGN_OR_RETURN(ParsedEnvelope parsed, ParseEnvelope(bytes, limits));
  if (parsed.which() != schema::Envelope::HIDDEN) {
    return InvalidError(std::string("expected a hidden frame, got ") +
                        EnvelopeKindName(parsed.which()));
  }
  return internal::GuardedRead(
      [&] { return internal::ReadHidden(parsed.root().getHidden()); });
}

Frame MarshalLogits(const Logits& logits) {
  return MarshalEnvelopeInPlace(
      CanonicalWords<schema::Logits>(logits.payload.size()) +
          LayerDigestWords(logits.layer_digests),
      [&logits](schema::Envelope::Builder root) {
        internal::WriteLogits(logits, root.initLogits());
      });
}

Result<Logits> UnmarshalLogits(std::span<const uint8_t> bytes,
                               const DecodeLimits& limits) {
  LOCKSTEP_ASSIGN_OR_RETURN(ParsedEnvelope parsed, ParseEnvelope(bytes, limits));
  if (parsed.which() != schema::Envelope::LOGITS) {
    return InvalidError(std::string("expected logits, got ") +
                        EnvelopeKindName(parsed.which()));
  }
  return internal::GuardedRead(
      [&] { return internal::ReadLogits(parsed.root().getLogits()); });
}

}  // namespace lockstep::wire
