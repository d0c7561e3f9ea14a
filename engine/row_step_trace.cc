#include "engine/row_step_trace.h"

#include <bit>
#include <cassert>
#include <cstdint>

namespace lockstep {

static_assert(std::endian::native == std::endian::little,
              "trace digests hash the floats' in-memory bytes as little-endian");

void RowStepTrace::Start() {
  for (Sha256Stream& s : streams_) s = Sha256Stream();
  done_.clear();
}

void RowStepTrace::SetChunk(size_t rows, size_t steps_from) {
  assert(steps_from <= rows);
  rows_ = rows;
  steps_from_ = steps_from;
  layer_ = 0;
  first_done_ = done_.size();
  done_.resize(first_done_ + rows - steps_from, std::vector<Digest>(layers_));
}

void RowStepTrace::AfterLayer(int /*layer*/, std::span<float> hidden) {
  assert(layer_ < layers_);
  const size_t width = hidden.size() / rows_;
  Sha256Stream& stream = streams_[layer_];
  auto feed = [&](size_t from, size_t to) {
    const std::span<const float> rows = hidden.subspan(from * width, (to - from) * width);
    stream.Update({reinterpret_cast<const uint8_t*>(rows.data()), rows.size_bytes()});
  };
  size_t start = 0;
  for (size_t r = steps_from_; r < rows_; ++r) {  // each step row ends a segment
    feed(start, r + 1);
    done_[first_done_ + r - steps_from_][layer_] = stream.Finalize();
    stream = Sha256Stream();
    start = r + 1;
  }
  feed(start, rows_);
  ++layer_;
}

}  // namespace lockstep
