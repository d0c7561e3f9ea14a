#include "engine/ops/packed_matrix.h"

#include <sys/mman.h>

#include <algorithm>
#include <bit>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>
#include <new>
#include <vector>

#include "engine/ops/huge_pages.h"
#include "base/populate.h"
#include "engine/ops/pack_bf16.h"
#include "engine/ops/quant_blocks.h"
#include "engine/ops/quant_panel.h"
#include "engine/ops/thread_pool.h"

namespace lockstep::ops {
namespace {

static_assert(std::endian::native == std::endian::little, "bf16 bytes are read as host u16");

constexpr size_t kSmallPage = 4096;


float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// The rows [r, r + n) of a matrix as the packers take them: whole(i) for
// each whole panel whose first row is r + i, row(i) for every other row,
// in order; stops at the first call that returns false (and returns it).
template <class Whole, class Row>
bool ForPanelsAndRows(size_t r, size_t n, Whole&& whole, Row&& row) {
  for (size_t i = 0; i < n;) {
    if ((r + i) % kPanelRows == 0 && n - i >= kPanelRows) {
      if (!whole(i)) return false;
      i += kPanelRows;
    } else {
      if (!row(i)) return false;
      ++i;
    }
  }
  return true;
}

struct TypeRow {
  WeightType type;
  GgmlType ggml;
  const QuantPanel* panel;  // quantized types only
};
constexpr TypeRow kTypes[] = {
    {WeightType::kF32, GgmlType::kF32, nullptr},       {WeightType::kBf16, GgmlType::kBF16, nullptr},
    {WeightType::kF16, GgmlType::kF16, nullptr},       {WeightType::kQ8_0, GgmlType::kQ8_0, &kQ8_0Panel},
    {WeightType::kQ4_0, GgmlType::kQ4_0, &kQ4_0Panel}, {WeightType::kQ4_K, GgmlType::kQ4_K, &kQ4_KPanel},
    {WeightType::kQ5_K, GgmlType::kQ5_K, &kQ5_KPanel}, {WeightType::kQ6_K, GgmlType::kQ6_K, &kQ6_KPanel},
};

const TypeRow& RowOf(WeightType type) { return kTypes[static_cast<size_t>(type)]; }

}  // namespace

GgmlType GgmlTypeOf(WeightType type) { return RowOf(type).ggml; }

WeightType WeightTypeOf(GgmlType t) {
  for (const TypeRow& r : kTypes) {
    if (r.ggml == t) return r.type;
  }
  assert(false && "WeightTypeOf: a GgmlType outside E2.3");
  return WeightType::kF32;
}

const QuantPanel* QuantPanelOf(WeightType type) { return RowOf(type).panel; }

std::string PackedLayoutTag() {
  // Bump when the bytes of any type's panels change in a way the numbers
  // below do not show.
  constexpr int kLayoutVersion = 1;
  std::string tag = "packed layout " + std::to_string(kLayoutVersion) + ": panel rows " +
                    std::to_string(kPanelRows) + ", bf16 slot 1 at " + std::to_string(Bf16Slot(1)) +
                    ", halves in row order";
  for (const TypeRow& r : kTypes) {
    if (r.panel == nullptr) continue;
    const QuantPanel& q = *r.panel;
    tag += "; " + std::string(BlockOf(q.ggml).name) + " block " + std::to_string(q.block) + "/" +
           std::to_string(q.sub) + " head " + std::to_string(q.head_bytes) + " group " +
           std::to_string(q.group) + "x" + std::to_string(q.group_bytes);
  }
  return tag;
}

Status PackedMatrix::CheckCols(WeightType type, size_t cols, const std::string& what) {
  return CheckRowLength(GgmlTypeOf(type), cols, what.c_str());
}

size_t PackedMatrix::PanelBytesFor(size_t cols, WeightType type) {
  const QuantPanel* q = QuantPanelOf(type);
  return q != nullptr ? cols / q->block * q->BlockBytes()
                      : kPanelRows * cols * (type == WeightType::kF32 ? 4 : 2);
}

std::optional<size_t> PackedMatrix::BytesFor(uint64_t rows, uint64_t cols, WeightType type) {
  constexpr uint64_t kMaxSide = uint64_t{1} << 40, kMaxBytes = uint64_t{1} << 44;
  if (rows == 0 || cols == 0 || rows > kMaxSide || cols > kMaxSide) return std::nullopt;
  if (static_cast<size_t>(type) >= std::size(kTypes) || !CheckCols(type, cols, "").ok()) return std::nullopt;
  const uint64_t panel = PanelBytesFor(cols, type);  // at most 128 * 2^40: no overflow
  const uint64_t panels = (rows + kPanelRows - 1) / kPanelRows;
  if (panel > kMaxBytes || panels > kMaxBytes / panel) return std::nullopt;
  return panels * panel;
}

void PackedMatrix::SetShape(size_t rows, size_t cols, WeightType type) {
  rows_ = rows;
  cols_ = cols;
  type_ = type;
  panel_bytes_ = PanelBytesFor(cols, type);
}

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

void PackedMatrix::Allocate(size_t rows, size_t cols, WeightType type, Populate when) {
  assert(CheckCols(type, cols, "PackedMatrix").ok());
  SetShape(rows, cols, type);
  const size_t n = bytes();
  if (n == 0) return;
  // A large matrix starts on a huge page, but its size is rounded to small
  // pages only: rounded to 2 MB, a MoE expert of 3 MB (Qwen3-30B-A3B's, in
  // bf16) kept 4 MB resident. Its last partial 2 MB block is small pages.
  const size_t align = n >= kHugePageBytes ? kHugePageBytes : n >= kSmallPage ? kSmallPage : 64;
  const size_t unit = n >= kSmallPage ? kSmallPage : 64;
  const size_t rounded = (n + unit - 1) / unit * unit;
  void* p = nullptr;
  if (posix_memalign(&p, align, rounded) != 0) throw std::bad_alloc();
  data_.reset(static_cast<uint8_t*>(p));
  storage_bytes_ = rounded;
  if (when == Populate::kNow) {
    PopulateAdvisingHugePages(
        rounded, [this] { AdviseHugePages(); }, [this, rounded] { PopulatePages(0, rounded); });
  }
  // Only the last panel can hold padding rows; the rest is written by the
  // packers, so zero just that panel (and the rounding slack), populated
  // first when the rest is populated later (base/populate.h).
  const size_t tail = (panels() - 1) * PanelBytes();
  if (when != Populate::kNow) PopulateForWrite(static_cast<uint8_t*>(p) + tail, rounded - tail);
  std::memset(static_cast<uint8_t*>(p) + tail, 0, rounded - tail);
}

void PackedMatrix::PopulatePages(size_t begin, size_t end) {
  if (storage_bytes_ < kSmallPage) return;  // a small matrix: inside the heap
  end = std::min(end, storage_bytes_);
  begin = begin / kSmallPage * kSmallPage;
  end = (end + kSmallPage - 1) / kSmallPage * kSmallPage;  // storage is whole pages
  if (begin < end) PopulateForWrite(data_.get() + begin, end - begin);
}

// Before the first touch only when free 2 MB blocks cover the storage
// (engine/ops/huge_pages.h): otherwise every fault may compact memory
// synchronously (THP defrag "madvise"), which cost 4-6 s of system time
// loading a 2.5 GB checkpoint on a machine whose memory was full of page
// cache; advised after populating, khugepaged collapses the pages later.
void PackedMatrix::AdviseHugePages() {
  if (storage_bytes_ >= kHugePageBytes) (void)madvise(data_.get(), storage_bytes_, MADV_HUGEPAGE);
}

PackedMatrix PackedMatrix::FromF32(const float* w, size_t rows, size_t cols) {
  PackedMatrix m = Allocated(rows, cols, WeightType::kF32);
  m.PackF32Rows(0, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(w),
                                            rows * cols * sizeof(float)));
  return m;
}

void PackedMatrix::PackF32Rows(size_t r0, std::span<const uint8_t> bytes) {
  const size_t n = cols_ == 0 ? 0 : bytes.size() / (4 * cols_);
  for (size_t i = 0; i < n; ++i) {  // see PackBf16Rows for the loop order
    const uint8_t* src = bytes.data() + 4 * i * cols_;
    uint8_t* dst = data_.get() + 4 * Index(r0 + i, 0);
    for (size_t k = 0; k < cols_; ++k) std::memcpy(dst + 4 * k * kPanelRows, src + 4 * k, 4);
  }
}

PackedMatrix PackedMatrix::FromBf16Bytes(std::span<const uint8_t> bytes, size_t rows,
                                         size_t cols, WeightType type, ThreadPool* pool) {
  PackedMatrix m = Allocated(rows, cols, type);
  m.PackBf16Rows(0, bytes, pool);
  return m;
}

PackedMatrix PackedMatrix::Allocated(size_t rows, size_t cols, WeightType type, Populate when) {
  PackedMatrix m;
  m.Allocate(rows, cols, type, when);
  return m;
}

void PackedMatrix::PackBf16Rows(size_t r0, std::span<const uint8_t> bytes, ThreadPool* pool) {
  const size_t n = cols_ == 0 ? 0 : bytes.size() / (2 * cols_);
  ForEachChunk(pool, n, kPanelRows * 8, [&](size_t b, size_t e, size_t) {
    if (type_ == WeightType::kBf16) {
      PackBf16Range(r0 + b, bytes.data() + 2 * b * cols_, e - b);
      return;
    }
    for (size_t i = b; i < e; ++i) {  // widened: row by row, as below
      const uint8_t* src = bytes.data() + 2 * i * cols_;
      uint32_t* dst = reinterpret_cast<uint32_t*>(data_.get()) + Index(r0 + i, 0);
      for (size_t k = 0; k < cols_; ++k) {
        uint16_t v;
        std::memcpy(&v, src + 2 * k, 2);
        dst[k * kPanelRows] = WidenBf16Bits(v);
      }
    }
  });
}

// Whole panels through the panel packer (a register transpose where the
// CPU has one); rows of a panel only partly in [r, r + n) row by row:
// sequential reads, and the panel being written stays in cache.
void PackedMatrix::PackBf16Range(size_t r, const uint8_t* src, size_t n) {
  const PackBf16PanelFn pack_panel = BestPackBf16Panel();
  uint16_t* const dst = reinterpret_cast<uint16_t*>(data_.get());
  const size_t row_bytes = 2 * cols_;
  ForPanelsAndRows(r, n, [&](size_t i) {
    pack_panel(src + i * row_bytes, row_bytes, cols_, dst + Index(r + i, 0));
    return true;
  }, [&](size_t i) {
    uint16_t* at = dst + Index(r + i, 0);
    const uint8_t* row = src + i * row_bytes;
    for (size_t k = 0; k < cols_; ++k) std::memcpy(at + k * kPanelRows, row + 2 * k, 2);
    return true;
  });
}

void PackedMatrix::PackRows(size_t r0, std::span<const uint8_t> bytes, ThreadPool* pool) {
  if (type_ == WeightType::kF32) return PackF32Rows(r0, bytes);
  if (type_ == WeightType::kBf16) return PackBf16Rows(r0, bytes, pool);
  const size_t row_bytes = GgmlRowBytes(GgmlTypeOf(type_), cols_);
  const size_t n = row_bytes == 0 ? 0 : bytes.size() / row_bytes;
  assert(r0 + n <= rows_);
  ForEachChunk(pool, n, kPanelRows * 8, [&](size_t b, size_t e, size_t) {
    PackGgufRange(r0 + b, bytes.data() + b * row_bytes, e - b);
  });
}

void PackedMatrix::PackGgufRange(size_t r, const uint8_t* src, size_t n) {
  const size_t row_bytes = GgmlRowBytes(GgmlTypeOf(type_), cols_);
  for (size_t i = 0; i < n; ++i, src += row_bytes) {
    const size_t row = r + i;
    if (const QuantPanel* q = QuantPanelOf(type_)) {
      PackQuantRow(*q, src, cols_, mutable_panel(row / kPanelRows), row % kPanelRows);
      continue;
    }
    uint8_t* dst = data_.get() + 2 * Index(row, 0);  // kF16: halves kept
    for (size_t k = 0; k < cols_; ++k) std::memcpy(dst + 2 * k * kPanelRows, src + 2 * k, 2);
  }
}

PackedMatrix PackedMatrix::View(std::shared_ptr<const void> owner, const uint8_t* bytes,
                                size_t rows, size_t cols, WeightType type) {
  PackedMatrix m;
  m.SetShape(rows, cols, type);
  m.owner_ = std::move(owner);
  m.view_ = bytes;
  return m;
}

bool PackedMatrix::SameAsRows(size_t r0, std::span<const uint8_t> bytes) const {
  assert(r0 + bytes.size() / GgmlRowBytes(GgmlTypeOf(type_), cols_) <= rows_);
  return SameAsPanelRows(r0, bytes);
}

bool PackedMatrix::PaddingIsZero() const {
  const size_t padding = panels() * kPanelRows - rows_;
  if (padding == 0) return true;
  const std::vector<uint8_t> zeros(padding * GgmlRowBytes(GgmlTypeOf(type_), cols_), 0);
  return SameAsPanelRows(rows_, zeros);
}

// As the packers walk them: whole panels packed into a scratch panel and
// compared at once; other rows one by one (a quantized row by its own
// bytes, quant_panel.h; the others element by element).
bool PackedMatrix::SameAsPanelRows(size_t r0, std::span<const uint8_t> bytes) const {
  const size_t row_bytes = GgmlRowBytes(GgmlTypeOf(type_), cols_);
  const size_t n = row_bytes == 0 ? 0 : bytes.size() / row_bytes;
  const QuantPanel* q = QuantPanelOf(type_);
  const size_t elem = type_ == WeightType::kF32 ? 4 : 2;  // unquantized types
  auto row = [&](size_t i) {
    const uint8_t* src = bytes.data() + i * row_bytes;
    const size_t r = r0 + i;
    if (q != nullptr) return SameAsQuantRow(*q, src, cols_, panel(r / kPanelRows), r % kPanelRows);
    for (size_t k = 0; k < cols_; ++k) {
      if (std::memcmp(base() + elem * Index(r, k), src + elem * k, elem) != 0) return false;
    }
    return true;
  };
  thread_local std::vector<uint8_t> scratch;
  auto whole = [&](size_t i) {
    if (q == nullptr && type_ != WeightType::kBf16) {  // f32, f16: no panel packer
      for (size_t j = 0; j < kPanelRows; ++j) {
        if (!row(i + j)) return false;
      }
      return true;
    }
    const uint8_t* src = bytes.data() + i * row_bytes;
    scratch.resize(PanelBytes());
    if (q != nullptr) {
      for (size_t j = 0; j < kPanelRows; ++j) PackQuantRow(*q, src + j * row_bytes, cols_, scratch.data(), j);
    } else {
      BestPackBf16Panel()(src, row_bytes, cols_, reinterpret_cast<uint16_t*>(scratch.data()));
    }
    return std::memcmp(scratch.data(), panel((r0 + i) / kPanelRows), PanelBytes()) == 0;
  };
  return ForPanelsAndRows(r0, n, whole, row);
}

float PackedMatrix::At(size_t r, size_t k) const {
  if (const QuantPanel* q = QuantPanelOf(type_)) {
    return QuantPanelValue(*q, panel(r / kPanelRows), cols_, r % kPanelRows, k);
  }
  const size_t i = Index(r, k);
  if (type_ == WeightType::kF32) return reinterpret_cast<const float*>(base())[i];
  const uint16_t h = reinterpret_cast<const uint16_t*>(base())[i];
  return type_ == WeightType::kF16 ? WidenF16(h) : BitsToFloat(WidenBf16Bits(h));
}

void PackedMatrix::CopyRow(size_t r, float* out) const {
  for (size_t k = 0; k < cols_; ++k) out[k] = At(r, k);
}

}  // namespace lockstep::ops
