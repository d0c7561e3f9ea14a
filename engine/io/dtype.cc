#include "engine/io/dtype.h"

#include <array>

namespace lockstep {
namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  int bits;                // one element; 0 for block types
  int block_elems = 1;     // 0: sub-byte element
  int block_bytes = 0;     // bits / 8 unless a block type
  int ggml = -1;           // ggml type id, -1 when GGUF cannot hold it
};

constexpr std::array<DTypeRow, 25> kRows = {{
    {DType::kBool, "BOOL", 8, 1, 1},        {DType::kU8, "U8", 8, 1, 1},
    {DType::kI8, "I8", 8, 1, 1},            {DType::kF8E5M2, "F8_E5M2", 8, 1, 1},
    {DType::kF8E4M3, "F8_E4M3", 8, 1, 1},   {DType::kF8E8M0, "F8_E8M0", 8, 1, 1},
    {DType::kI16, "I16", 16, 1, 2},         {DType::kU16, "U16", 16, 1, 2},
    {DType::kF16, "F16", 16, 1, 2, 1},      {DType::kBF16, "BF16", 16, 1, 2, 30},
    {DType::kI32, "I32", 32, 1, 4},         {DType::kU32, "U32", 32, 1, 4},
    {DType::kF32, "F32", 32, 1, 4, 0},      {DType::kF64, "F64", 64, 1, 8},
    {DType::kI64, "I64", 64, 1, 8},         {DType::kU64, "U64", 64, 1, 8},
    {DType::kC64, "C64", 64, 1, 8},         {DType::kF4, "F4", 4, 0, 0},
    {DType::kF6E2M3, "F6_E2M3", 6, 0, 0},   {DType::kF6E3M2, "F6_E3M2", 6, 0, 0},
    {DType::kQ4_0, "Q4_0", 0, 32, 18, 2},   {DType::kQ8_0, "Q8_0", 0, 32, 34, 8},
    {DType::kQ4_K, "Q4_K", 0, 256, 144, 12}, {DType::kQ5_K, "Q5_K", 0, 256, 176, 13},
    {DType::kQ6_K, "Q6_K", 0, 256, 210, 14},
}};

const DTypeRow& Row(DType d) {
  for (const DTypeRow& r : kRows) {
    if (r.dtype == d) return r;
  }
  return kRows[0];  // unreachable: kRows lists every enumerator
}

}  // namespace

int DTypeBits(DType d) { return Row(d).bits; }

int DTypeSize(DType d) {
  int bits = Row(d).bits;
  return bits % 8 == 0 ? bits / 8 : 0;
}

std::string_view DTypeName(DType d) { return Row(d).name; }

std::optional<DType> ParseDType(std::string_view name) {
  for (const DTypeRow& r : kRows) {
    if (r.name == name && r.bits != 0) return r.dtype;
  }
  return std::nullopt;
}

int DTypeBlockElems(DType d) { return Row(d).block_elems; }
int DTypeBlockBytes(DType d) { return Row(d).block_bytes; }
bool IsBlockDType(DType d) { return Row(d).bits == 0; }

uint64_t DTypeRowBytes(DType d, uint64_t elems) {
  const DTypeRow& r = Row(d);
  return elems / static_cast<uint64_t>(r.block_elems) * static_cast<uint64_t>(r.block_bytes);
}

std::optional<DType> DTypeFromGgml(uint32_t ggml_type) {
  for (const DTypeRow& r : kRows) {
    if (r.ggml >= 0 && static_cast<uint32_t>(r.ggml) == ggml_type) return r.dtype;
  }
  return std::nullopt;
}

uint32_t GgmlTypeOf(DType d) { return static_cast<uint32_t>(Row(d).ggml); }

}  // namespace lockstep
