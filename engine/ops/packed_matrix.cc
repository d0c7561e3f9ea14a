#include "engine/ops/packed_matrix.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

namespace lockstep::ops {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;

uint32_t WidenBits(uint16_t b) { return static_cast<uint32_t>(b) << 16; }  // §4.1

float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

void PackedMatrix::Allocate(size_t rows, size_t cols, WeightType type) {
  rows_ = rows;
  cols_ = cols;
  type_ = type;
  const size_t n = bytes();
  if (n == 0) return;
  const size_t align = n >= kHugePage ? kHugePage : 64;
  const size_t rounded = (n + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) throw std::bad_alloc();
  if (align == kHugePage) (void)madvise(p, rounded, MADV_HUGEPAGE);
  // Only the last panel can hold padding rows; the rest is written by the
  // packers, so zero just that panel (and the rounding slack).
  const size_t tail = (panels() - 1) * kPanelRows * cols * ElementBytes();
  std::memset(static_cast<uint8_t*>(p) + tail, 0, rounded - tail);
  data_.reset(static_cast<uint8_t*>(p));
}

PackedMatrix PackedMatrix::FromF32(const float* w, size_t rows, size_t cols) {
  PackedMatrix m;
  m.Allocate(rows, cols, WeightType::kF32);
  float* out = reinterpret_cast<float*>(m.data_.get());
  for (size_t r0 = 0; r0 < rows; r0 += kPanelRows) {  // writes in storage order
    const size_t n = rows - r0 < kPanelRows ? rows - r0 : kPanelRows;
    for (size_t k = 0; k < cols; ++k) {
      for (size_t i = 0; i < n; ++i) out[m.Index(r0 + i, k)] = w[(r0 + i) * cols + k];
    }
  }
  return m;
}

PackedMatrix PackedMatrix::FromBf16Bytes(std::span<const uint8_t> bytes, size_t rows,
                                         size_t cols, WeightType type) {
  PackedMatrix m;
  m.Allocate(rows, cols, type);
  uint16_t* out16 = reinterpret_cast<uint16_t*>(m.data_.get());
  uint32_t* out32 = reinterpret_cast<uint32_t*>(m.data_.get());
  for (size_t r0 = 0; r0 < rows; r0 += kPanelRows) {  // writes in storage order
    const size_t n = rows - r0 < kPanelRows ? rows - r0 : kPanelRows;
    for (size_t k = 0; k < cols; ++k) {
      for (size_t i = 0; i < n; ++i) {
        const uint8_t* src = bytes.data() + 2 * ((r0 + i) * cols + k);
        const uint16_t b = static_cast<uint16_t>(src[0] | (src[1] << 8));
        if (type == WeightType::kBf16) {
          out16[m.Index(r0 + i, k)] = b;
        } else {
          out32[m.Index(r0 + i, k)] = WidenBits(b);
        }
      }
    }
  }
  return m;
}

float PackedMatrix::At(size_t r, size_t k) const {
  const size_t i = Index(r, k);
  if (type_ == WeightType::kF32) return reinterpret_cast<const float*>(data_.get())[i];
  return BitsToFloat(WidenBits(reinterpret_cast<const uint16_t*>(data_.get())[i]));
}

void PackedMatrix::CopyRow(size_t r, float* out) const {
  for (size_t k = 0; k < cols_; ++k) out[k] = At(r, k);
}

}  // namespace lockstep::ops
