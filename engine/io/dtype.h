// DType: the element types a weight file may hold, with their sizes.
//
// Every dtype of the safetensors format is parsed so that a file carrying an
// unusual tensor is still readable as a whole; which dtypes a reader can
// convert is that reader's business (SafetensorsFile::ReadF32). Sub-byte
// types (F4, F6_*) have bit sizes that are not multiples of 8.
//
// The block types (Q4_0, Q8_0, Q4_K, Q5_K, Q6_K) exist only in GGUF files
// (EXTENSIONS.md E2.3): a row of n elements is n / DTypeBlockElems blocks
// of DTypeBlockBytes bytes each. A safetensors header never names one
// (ParseDType does not know them). GGUF names every type by its ggml id.
// Plain functions over a plain enum: thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace lockstep {

enum class DType {
  kBool, kU8, kI8, kF8E5M2, kF8E4M3, kF8E8M0, kI16, kU16, kF16, kBF16,
  kI32, kU32, kF32, kF64, kI64, kU64, kC64, kF4, kF6E2M3, kF6E3M2,
  // GGUF block types (E2.3).
  kQ4_0, kQ8_0, kQ4_K, kQ5_K, kQ6_K,
};

// Size of one element in bits (4 for F4, 16 for BF16, 64 for C64); 0 for
// the block types.
int DTypeBits(DType d);
// Size of one element in bytes; 0 for the sub-byte and the block types.
int DTypeSize(DType d);
// The safetensors spelling: "BF16", "F8_E4M3", "BOOL", ...; ggml's for the
// block types ("Q4_K").
std::string_view DTypeName(DType d);
// Inverse of DTypeName over the safetensors dtypes; nullopt on an unknown
// (or wrongly cased) name and on the block types' names.
std::optional<DType> ParseDType(std::string_view name);

// Elements and bytes of one block: (32, 34) for Q8_0, (256, 210) for Q6_K,
// (1, size) for a whole-byte element type, (0, 0) for sub-byte types.
int DTypeBlockElems(DType d);
int DTypeBlockBytes(DType d);
bool IsBlockDType(DType d);
// Bytes of `elems` consecutive elements (a row): elems / block elems *
// block bytes. REQUIRES DTypeBlockElems(d) > 0 and elems a multiple of it.
uint64_t DTypeRowBytes(DType d, uint64_t elems);

// The dtypes a GGUF file may hold (F32, F16, BF16 and the block types)
// by ggml type id (E2.3: 0, 1, 30, 2, 8, 12, 13, 14); nullopt for any
// other id.
std::optional<DType> DTypeFromGgml(uint32_t ggml_type);
// The ggml id of one of those dtypes. REQUIRES DTypeFromGgml of it exists.
uint32_t GgmlTypeOf(DType d);

}  // namespace lockstep
