#include "engine/layer_trace.h"

#include <bit>
#include <cstdint>

namespace lockstep {

static_assert(std::endian::native == std::endian::little,
              "trace digests hash the floats' in-memory bytes as little-endian");

Digest HiddenSha256(std::span<const float> hidden) {
  return Sha256({reinterpret_cast<const uint8_t*>(hidden.data()), hidden.size_bytes()});
}

void LayerTrace::AfterLayer(int /*layer*/, std::span<float> hidden) {
  digests_.push_back(HiddenSha256(hidden));
}

}  // namespace lockstep
