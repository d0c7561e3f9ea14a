// PackedMatrix: a linear layer's [rows][cols] weight in the panel layout
// every matmul kernel reads (CIS-2 §5.2 row dots, laid out for SIMD lanes).
//
// Layout: ceil(rows / kPanelRows) panels; panel p holds, for k = 0..cols-1,
// the kPanelRows values w[p*kPanelRows + i][k], i = 0..kPanelRows-1,
// contiguously. So a kernel that gives each SIMD lane one row reads one
// contiguous stream per panel and sums each row strictly in k order.
// Rows past `rows` in the last panel are zero and never stored to outputs.
//
// Element type: f32, or bf16 bits kept as loaded (§4.1). A bf16 element is
// widened in registers by the literal shift (b << 16), which gives exactly
// the f32 that widen-at-load (§4.2) gives, so results are bit-identical and
// the bytes streamed per token halve.
//
// bf16 k-rows are interleaved: 32-bit word j (j < 16) of a k-row holds row
// j in its low half and row 16 + j in its high half (Bf16Slot). So a
// vector of L words yields L consecutive rows of either half with one
// in-lane op: `word << 16` (rows j..) or `word & 0xFFFF0000` (rows 16+j..),
// both exactly the §4.1 widening; no cross-lane shuffle, one load.
//
// f16 (kF16): IEEE halves as loaded, rows in order within a k-row, widened
// in registers exactly (subnormal halves included: E2.3).
//
// Quantized (kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K): GGUF blocks repacked
// across the panel's rows at about the file's size (quant_panel.h), each
// weight dequantized in registers to E2.3's f32 value. cols is a multiple
// of the type's block (CheckCols).
//
// Storage is owned (64-byte aligned, huge pages advised when large) or, for
// View, bytes someone else keeps alive (a mapped weight cache).
// Move-only, immutable after construction, thread-safe to read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>

#include "base/status.h"
#include "engine/ops/quant_blocks.h"
#include "engine/ops/quant_panel.h"

namespace lockstep::ops {

inline constexpr size_t kPanelRows = 32;

// The position of panel row i (< kPanelRows) within a bf16 k-row.
constexpr size_t Bf16Slot(size_t i) {
  return i < kPanelRows / 2 ? 2 * i : 2 * (i - kPanelRows / 2) + 1;
}

enum class WeightType : uint8_t { kF32, kBf16, kF16, kQ8_0, kQ4_0, kQ4_K, kQ5_K, kQ6_K };

// The GGUF type whose rows PackRows takes for `type` (F32, BF16, F16, ...).
GgmlType GgmlTypeOf(WeightType type);
// The resident type that keeps GGUF type `t` at its own size.
WeightType WeightTypeOf(GgmlType t);
// The panel layout of a quantized type; nullptr for kF32, kBf16, kF16.
const QuantPanel* QuantPanelOf(WeightType type);
// This layout as text: kPanelRows, the bf16 interleave, each quantized
// type's panel block (quant_panel.h) and a version for changes those do not
// show. A file of packed matrices (weight_cache.h) is keyed by it, so a
// build that packs otherwise never reads it. The layout is one for every
// ISA: each ISA's kernels read these same panels.
std::string PackedLayoutTag();

class ThreadPool;

class PackedMatrix {
 public:
  PackedMatrix() = default;
  PackedMatrix(PackedMatrix&&) noexcept = default;
  PackedMatrix& operator=(PackedMatrix&&) noexcept = default;

  // From row-major f32 w[rows][cols].
  static PackedMatrix FromF32(const float* w, size_t rows, size_t cols);
  // From row-major little-endian bf16 bytes (2*rows*cols of them, any
  // alignment): kept as bf16 when type == kBf16, widened by §4.1 when kF32.
  // With a pool, rows are packed in parallel (the result is the same).
  static PackedMatrix FromBf16Bytes(std::span<const uint8_t> bytes, size_t rows, size_t cols,
                                    WeightType type, ThreadPool* pool = nullptr);
  // Storage for rows x cols whose rows the caller fills with PackBf16Rows
  // (a matrix can be packed block by block as its bytes are read). Rows
  // never filled hold unspecified values. kNow faults every page in at
  // once (one call, not a fault per page); kLater leaves that to
  // PopulatePages, so a loader can fault many matrices in from several
  // threads.
  enum class Populate : uint8_t { kNow, kLater };
  // REQUIRES cols % BlockOf(GgmlTypeOf(type)).elems == 0 (CheckCols).
  static PackedMatrix Allocated(size_t rows, size_t cols, WeightType type,
                                Populate when = Populate::kNow);
  // Invalid, naming `what` and the type, unless a matrix of `cols`
  // columns can hold `type` (whole blocks per row).
  static Status CheckCols(WeightType type, size_t cols, const std::string& what);
  // bytes() of a rows x cols matrix of `type`, or nullopt when rows or
  // cols is 0 or above 2^40, cols is not whole blocks of the type, or the
  // size is above 2^44 (what a weight cache checks a file's entries by).
  static std::optional<size_t> BytesFor(uint64_t rows, uint64_t cols, WeightType type);
  // The matrix stored at `bytes` in this layout (bytes() of them, 64-byte
  // aligned), kept alive by `owner`; nothing is copied. Such a matrix is
  // never packed into: check it with SameAsRows and PaddingIsZero.
  static PackedMatrix View(std::shared_ptr<const void> owner, const uint8_t* bytes, size_t rows,
                           size_t cols, WeightType type);
  // Whether packing these rows as PackRows does (n rows in the layout
  // PackRows takes for type()) gives exactly the bytes stored for rows
  // [r0, r0 + n). REQUIRES r0 + n <= rows. Distinct row ranges may be
  // checked from different threads at once.
  bool SameAsRows(size_t r0, std::span<const uint8_t> bytes) const;
  // Whether the padding rows of the last panel hold what packing leaves
  // there (zeros: the packing of zero rows, for every type).
  bool PaddingIsZero() const;
  // The stored bytes, bytes() of them (what a weight cache writes).
  std::span<const uint8_t> stored() const { return {base(), bytes()}; }

  // Bytes of storage (whole pages for a large matrix): the range
  // PopulatePages takes.
  size_t storage_bytes() const { return storage_bytes_; }
  // Faults storage bytes [begin, end) in, rounded out to pages. Before any
  // packing; distinct ranges may be populated from different threads.
  void PopulatePages(size_t begin, size_t end);
  // Advises huge pages for a large matrix: before PopulatePages when
  // HugePagesFreeFor(storage) (engine/ops/huge_pages.h), after it otherwise.
  void AdviseHugePages();
  // Packs rows [r0, r0 + n) from n row-major little-endian bf16 rows
  // (2 * n * cols bytes) as FromBf16Bytes does. REQUIRES r0 + n <= rows.
  // Distinct row ranges may be packed from different threads at once.
  void PackBf16Rows(size_t r0, std::span<const uint8_t> bytes, ThreadPool* pool = nullptr);
  // Packs rows [r0, r0 + n) from n row-major little-endian f32 rows
  // (4 * n * cols bytes, any alignment), bits kept. REQUIRES type() == kF32,
  // r0 + n <= rows. Distinct row ranges may be packed from different threads.
  void PackF32Rows(size_t r0, std::span<const uint8_t> bytes);
  // Packs rows [r0, r0 + n) from n whole rows in the GGUF layout of
  // GgmlTypeOf(type()) (each cols / block blocks, rows one after another:
  // n * GgmlRowBytes(...) bytes, any alignment). Each row lands where its
  // index says, so rows may be packed one at a time in any order. REQUIRES
  // r0 + n <= rows. Distinct rows may be packed from different threads at
  // once (no two rows share a byte); with a pool, rows are packed in
  // parallel (the result is the same).
  void PackRows(size_t r0, std::span<const uint8_t> bytes, ThreadPool* pool = nullptr);

  size_t rows() const { return rows_; }
  size_t cols() const { return cols_; }
  size_t panels() const { return (rows_ + kPanelRows - 1) / kPanelRows; }
  WeightType type() const { return type_; }
  bool empty() const { return rows_ == 0; }
  // Bytes of weight storage streamed by one pass over the matrix: what is
  // resident (padding rows of the last panel included).
  size_t bytes() const { return panels() * PanelBytes(); }
  // Bytes of one panel.
  size_t PanelBytes() const { return panel_bytes_; }

  // Panel p: [cols][kPanelRows] (bf16 rows in Bf16Slot order). REQUIRES
  // the matching type(), p < panels().
  const float* f32_panel(size_t p) const { return reinterpret_cast<const float*>(panel(p)); }
  const uint16_t* bf16_panel(size_t p) const { return reinterpret_cast<const uint16_t*>(panel(p)); }
  const uint16_t* f16_panel(size_t p) const { return reinterpret_cast<const uint16_t*>(panel(p)); }
  // Panel p's bytes, in the layout of type() (quant_panel.h when quantized).
  const uint8_t* panel(size_t p) const { return base() + p * PanelBytes(); }

  // w[r][k] as f32 (widened if bf16 or f16, E2.3's value if quantized).
  // REQUIRES r < rows, k < cols.
  float At(size_t r, size_t k) const;
  // out[k] = w[r][k] for k < cols (an embedding lookup, §2.5).
  void CopyRow(size_t r, float* out) const;

 private:
  struct Free {
    void operator()(uint8_t* p) const;
  };
  void Allocate(size_t rows, size_t cols, WeightType type, Populate when);
  void SetShape(size_t rows, size_t cols, WeightType type);
  // Rows [r, r + n) of a kBf16 matrix from n row-major rows at src.
  void PackBf16Range(size_t r, const uint8_t* src, size_t n);
  // Rows [r, r + n) of a kF16 or quantized matrix from n GGUF rows at src.
  void PackGgufRange(size_t r, const uint8_t* src, size_t n);
  // SameAsRows for rows [r0, r0 + n) of the panels, padding rows included.
  bool SameAsPanelRows(size_t r0, std::span<const uint8_t> bytes) const;
  // Bytes of one panel of cols columns of `type`. REQUIRES CheckCols.
  static size_t PanelBytesFor(size_t cols, WeightType type);
  uint8_t* mutable_panel(size_t p) { return data_.get() + p * PanelBytes(); }
  const uint8_t* base() const { return view_ != nullptr ? view_ : data_.get(); }
  // Element index of w[r][k] in a kF32, kBf16 or kF16 matrix.
  size_t Index(size_t r, size_t k) const {
    const size_t i = r % kPanelRows;
    return (r / kPanelRows) * kPanelRows * cols_ + k * kPanelRows +
           (type_ == WeightType::kBf16 ? Bf16Slot(i) : i);
  }

  size_t rows_ = 0;
  size_t cols_ = 0;
  WeightType type_ = WeightType::kF32;
  size_t panel_bytes_ = 0;  // PanelBytes(): set with rows_, cols_, type_
  size_t storage_bytes_ = 0;
  std::unique_ptr<uint8_t[], Free> data_;  // [panels][cols][kPanelRows] elements
  std::shared_ptr<const void> owner_;      // keeps view_ alive
  const uint8_t* view_ = nullptr;          // a View's storage (data_ is null)
};

}  // namespace lockstep::ops
