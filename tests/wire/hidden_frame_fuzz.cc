// Fuzz target for the wire decoders. Built as a libFuzzer binary when the
// compiler supports -fsanitize=fuzzer, and always linked into
// hidden_frame_fuzz_driver (fuzz_driver_main.cc) for CI.
//
// Properties checked on every input, beyond "no crash, no out-of-bounds
// read" (which the sanitizers check):
//  - a decoder either fails with Corrupt/Invalid or returns a value;
//  - whatever decodes re-encodes to a frame that decodes to the same bits,
//    and re-encoding that is byte-identical (the codec is a fixed point).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>

#include "wire/hidden_frame.h"
#include "wire/messages.h"

namespace {

using namespace lockstep;
using namespace lockstep::wire;

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "fuzz property violated: %s\n", what);
    std::abort();
  }
}

void CheckFailureKind(const Status& st) {
  Check(st.kind() == ErrorKind::kCorrupt || st.kind() == ErrorKind::kInvalid,
        "decoder failed with a kind other than Corrupt/Invalid");
}

void FuzzHidden(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  Result<HiddenFrame> frame = UnmarshalHidden(bytes, limits);
  if (!frame.ok()) return CheckFailureKind(frame.status());
  const Frame again = MarshalHidden(*frame);
  Result<HiddenFrame> back = UnmarshalHidden(again, limits);
  Check(back.ok(), "re-encoded hidden frame does not decode");
  Check(back->payload.size() == frame->payload.size() &&
            std::memcmp(back->payload.data(), frame->payload.data(),
                        frame->payload.size() * 4) == 0,
        "hidden payload bits changed in a round trip");
  Check(MarshalHidden(*back) == again, "hidden frame encoding is not a fixed point");
}

void FuzzLogits(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  Result<Logits> logits = UnmarshalLogits(bytes, limits);
  if (!logits.ok()) return CheckFailureKind(logits.status());
  const Frame again = MarshalLogits(*logits);
  Result<Logits> back = UnmarshalLogits(again, limits);
  Check(back.ok() && MarshalLogits(*back) == again, "logits round trip");
}

void FuzzMessage(std::span<const uint8_t> bytes, const DecodeLimits& limits) {
  Result<Message> message = ParseMessage(bytes, limits);
  if (!message.ok()) return CheckFailureKind(message.status());
  const Frame again = MarshalMessage(*message);
  Result<Message> back = ParseMessage(again, limits);
  Check(back.ok(), "re-encoded message does not parse");
  Check(MarshalMessage(*back) == again, "message encoding is not a fixed point");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  DecodeLimits limits;
  limits.max_frame_bytes = size_t{1} << 20;
  const std::span<const uint8_t> bytes(data, size);
  FuzzHidden(bytes, limits);
  FuzzLogits(bytes, limits);
  FuzzMessage(bytes, limits);
  return 0;
}
