// DType: the element types a safetensors header may name, with their sizes.
//
// Every dtype of the safetensors format is parsed so that a file carrying an
// unusual tensor is still readable as a whole; which dtypes a reader can
// convert is that reader's business (SafetensorsFile::ReadF32). Sub-byte
// types (F4, F6_*) have bit sizes that are not multiples of 8.
// Plain functions over a plain enum: thread-safe.
#pragma once

#include <optional>
#include <string_view>

namespace lockstep {

enum class DType {
  kBool, kU8, kI8, kF8E5M2, kF8E4M3, kF8E8M0, kI16, kU16, kF16, kBF16,
  kI32, kU32, kF32, kF64, kI64, kU64, kC64, kF4, kF6E2M3, kF6E3M2,
};

// Size of one element in bits (4 for F4, 16 for BF16, 64 for C64).
int DTypeBits(DType d);
// Size of one element in bytes; 0 for the sub-byte types F4 and F6_*.
int DTypeSize(DType d);
// The safetensors spelling: "BF16", "F8_E4M3", "BOOL", ...
std::string_view DTypeName(DType d);
// Inverse of DTypeName; nullopt on an unknown (or wrongly cased) name.
std::optional<DType> ParseDType(std::string_view name);

}  // namespace lockstep
