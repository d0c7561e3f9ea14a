// Internal to lockstep_wire: capnp <-> struct conversion for the tensor
// messages and digest fields, shared by hidden_frame.cc and messages.cc.
// Not for callers.
#pragma once

#include <string>
#include <vector>

#include <kj/exception.h>

#include "base/sha256.h"
#include "base/status.h"
#include "wire/hidden_frame.h"
#include "wire/lockstep.capnp.h"

namespace lockstep::wire::internal {

// A digest as a capnp Data field (32 bytes, not copied).
inline capnp::Data::Reader DigestData(const Digest& d) {
  return capnp::Data::Reader(d.data(), d.size());
}

void WriteHidden(const HiddenFrame& frame, schema::HiddenFrame::Builder out);
Result<HiddenFrame> ReadHidden(schema::HiddenFrame::Reader in);
void WriteLogits(const Logits& logits, schema::Logits::Builder out);
void WriteHandoff(const ChainHandoff& h, schema::ChainHandoff::Builder out);
// The canonical words a handoff adds to its message: its struct and its
// chain state blob (0 without one).
size_t HandoffWords(const std::optional<ChainHandoff>& h);
// The handoff of a TokenInput or HiddenFrame (`has`: its pointer is set);
// Corrupt naming `what` when its chain state is refused.
Result<std::optional<ChainHandoff>> ReadHandoff(bool has, schema::ChainHandoff::Reader in,
                                                const std::string& what);
Result<Logits> ReadLogits(schema::Logits::Reader in);
// Layer digests as one Data blob of 32-byte digests, and back (Corrupt
// naming `what` unless the blob is a whole number of digests).
void WriteLayerDigests(const std::vector<Digest>& digests, capnp::Data::Builder out);
Result<std::vector<Digest>> ReadLayerDigests(capnp::Data::Reader in, const std::string& what);
// Folds non-empty layer digests into a frame digest (tagged, counted).
void HashLayerDigests(Sha256Stream& s, const std::vector<Digest>& digests);

// Runs `read` (which returns a Result or Status) and turns a kj::Exception
// raised by capnp accessors -- e.g. a pointer of the wrong type where the
// schema expects Data -- into a Corrupt status.
template <typename F>
auto GuardedRead(F&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const kj::Exception& e) {
    return CorruptError(std::string("malformed frame: ") +
                        e.getDescription().cStr());
  }
}

}  // namespace lockstep::wire::internal
