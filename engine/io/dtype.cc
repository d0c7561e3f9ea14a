#include "engine/io/dtype.h"

#include <array>

namespace lockstep {
namespace {

struct DTypeRow {
  DType dtype;
  std::string_view name;
  int bits;
};

constexpr std::array<DTypeRow, 20> kRows = {{
    {DType::kBool, "BOOL", 8},       {DType::kU8, "U8", 8},
    {DType::kI8, "I8", 8},           {DType::kF8E5M2, "F8_E5M2", 8},
    {DType::kF8E4M3, "F8_E4M3", 8},  {DType::kF8E8M0, "F8_E8M0", 8},
    {DType::kI16, "I16", 16},        {DType::kU16, "U16", 16},
    {DType::kF16, "F16", 16},        {DType::kBF16, "BF16", 16},
    {DType::kI32, "I32", 32},        {DType::kU32, "U32", 32},
    {DType::kF32, "F32", 32},        {DType::kF64, "F64", 64},
    {DType::kI64, "I64", 64},        {DType::kU64, "U64", 64},
    {DType::kC64, "C64", 64},        {DType::kF4, "F4", 4},
    {DType::kF6E2M3, "F6_E2M3", 6},  {DType::kF6E3M2, "F6_E3M2", 6},
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
    if (r.name == name) return r.dtype;
  }
  return std::nullopt;
}

}  // namespace lockstep
