// Hostile safetensors headers: a named table of malformed files, each of
// which must be refused as Corrupt, and a seeded random-mutation loop that
// must never crash or accept an out-of-bounds tensor.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "engine/io/safetensors.h"
#include "engine/io/safetensors_header.h"
#include "tests/io/test_util.h"

namespace lockstep {
namespace {

// u64 LE length + header + `data` zero bytes.
std::vector<uint8_t> Build(const std::string& header, size_t data = 0) {
  std::vector<uint8_t> out;
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data, 0);
  return out;
}

std::vector<uint8_t> WithLength(uint64_t n, size_t total) {
  std::vector<uint8_t> out(total, ' ');
  for (int i = 0; i < 8 && i < static_cast<int>(total); ++i) {
    out[i] = static_cast<uint8_t>(n >> (8 * i));
  }
  return out;
}

std::string Entry(const std::string& name, const std::string& body) {
  return "{\"" + name + "\":{" + body + "}}";
}

struct BadCase {
  const char* name;
  std::vector<uint8_t> bytes;
  const char* must_mention;  // a tensor name, or "" for none
};

std::vector<BadCase> BadCases() {
  const std::string ok_dt = "\"dtype\":\"BF16\",";
  return {
      {"empty_file", {}, ""},
      {"seven_bytes", {1, 0, 0, 0, 0, 0, 0}, ""},
      {"header_len_over_100MiB", WithLength((100ull << 20) + 1, 64), ""},
      {"header_len_u64_max", WithLength(~0ull, 64), ""},
      {"header_len_past_eof", WithLength(100, 64), ""},
      {"header_not_json", Build("{\"a\":"), ""},
      {"header_not_object", Build("[1,2]"), ""},
      {"header_string", Build("\"x\""), ""},
      {"header_empty", Build(""), ""},
      {"trailing_garbage", Build("{} x"), ""},
      {"two_values", Build("{}{}"), ""},
      {"nul_byte", Build(std::string("{}\0", 3)), ""},
      {"invalid_utf8_key", Build("{\"\xff\xfe\":{}}"), ""},
      {"deep_nesting", Build(std::string(200, '[') + std::string(200, ']')), ""},
      {"metadata_not_object", Build("{\"__metadata__\":[]}"), ""},
      {"metadata_value_number", Build("{\"__metadata__\":{\"format\":1}}"), ""},
      {"metadata_value_null", Build("{\"__metadata__\":{\"format\":null}}"), ""},
      {"entry_not_object", Build("{\"w\":[1]}"), "w"},
      {"entry_null", Build("{\"w\":null}"), "w"},
      {"missing_dtype", Build(Entry("w", "\"shape\":[1],\"data_offsets\":[0,2]"), 2), "w"},
      {"missing_shape", Build(Entry("w", ok_dt + "\"data_offsets\":[0,2]"), 2), "w"},
      {"missing_offsets", Build(Entry("w", ok_dt + "\"shape\":[1]"), 2), "w"},
      {"unknown_dtype", Build(Entry("w", "\"dtype\":\"bf16\",\"shape\":[1],\"data_offsets\":[0,2]"), 2), "w"},
      {"dtype_number", Build(Entry("w", "\"dtype\":16,\"shape\":[1],\"data_offsets\":[0,2]"), 2), "w"},
      {"shape_not_array", Build(Entry("w", ok_dt + "\"shape\":1,\"data_offsets\":[0,2]"), 2), "w"},
      {"shape_negative", Build(Entry("w", ok_dt + "\"shape\":[-1],\"data_offsets\":[0,2]"), 2), "w"},
      {"shape_float", Build(Entry("w", ok_dt + "\"shape\":[1.0],\"data_offsets\":[0,2]"), 2), "w"},
      {"shape_string", Build(Entry("w", ok_dt + "\"shape\":[\"1\"],\"data_offsets\":[0,2]"), 2), "w"},
      {"shape_over_int64", Build(Entry("w", ok_dt + "\"shape\":[9223372036854775808],\"data_offsets\":[0,2]"), 2), "w"},
      {"shape_over_u64", Build(Entry("w", ok_dt + "\"shape\":[99999999999999999999],\"data_offsets\":[0,2]"), 2), "w"},
      {"shape_product_overflow", Build(Entry("w", ok_dt + "\"shape\":[4294967296,4294967296],\"data_offsets\":[0,2]"), 2), "w"},
      {"bytes_overflow", Build(Entry("w", ok_dt + "\"shape\":[9223372036854775807],\"data_offsets\":[0,2]"), 2), "w"},
      {"f4_half_byte", Build(Entry("w", "\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,1]"), 2), "w"},
      {"offsets_one_value", Build(Entry("w", ok_dt + "\"shape\":[1],\"data_offsets\":[0]"), 2), "w"},
      {"offsets_three_values", Build(Entry("w", ok_dt + "\"shape\":[1],\"data_offsets\":[0,2,4]"), 4), "w"},
      {"offsets_not_array", Build(Entry("w", ok_dt + "\"shape\":[1],\"data_offsets\":2"), 2), "w"},
      {"offsets_negative", Build(Entry("w", ok_dt + "\"shape\":[1],\"data_offsets\":[-2,0]"), 2), "w"},
      {"offsets_reversed", Build(Entry("w", ok_dt + "\"shape\":[1],\"data_offsets\":[2,0]"), 2), "w"},
      {"offsets_past_data", Build(Entry("w", ok_dt + "\"shape\":[1],\"data_offsets\":[2,4]"), 3), "w"},
      {"offsets_huge", Build(Entry("w", ok_dt + "\"shape\":[1],\"data_offsets\":[18446744073709551614,18446744073709551615]"), 2), "w"},
      {"size_mismatch", Build(Entry("w", ok_dt + "\"shape\":[2],\"data_offsets\":[0,2]"), 4), "w"},
      {"unknown_key", Build(Entry("w", ok_dt + "\"shape\":[1],\"data_offsets\":[0,2],\"x\":1"), 2), "w"},
      {"duplicate_tensor", Build("{\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
                                 "\"w\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}", 2), "w"},
      {"duplicate_field", Build(Entry("w", ok_dt + "\"shape\":[1],\"shape\":[1],\"data_offsets\":[0,2]"), 2), "shape"},
      {"overlap", Build("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                        "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}", 8), "b"},
      {"same_range", Build("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[2,4]},"
                           "\"b\":{\"dtype\":\"I16\",\"shape\":[1],\"data_offsets\":[2,4]}}", 8), "a"},
      {"contained", Build("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[5,6]},"
                          "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}}", 8), "a"},
  };
}

TEST(SafetensorsFuzzTest, MalformedHeadersAreCorrupt) {
  for (BadCase& c : BadCases()) {
    SCOPED_TRACE(c.name);
    auto f = SafetensorsFile::FromBuffer(c.bytes, std::string("case_") + c.name);
    ASSERT_FALSE(f.ok()) << "accepted";
    EXPECT_EQ(f.status().kind(), ErrorKind::kCorrupt) << f.status().ToString();
    const std::string m = f.status().message();
    EXPECT_NE(m.find(std::string("case_") + c.name), std::string::npos) << m;
    EXPECT_NE(m.find(c.must_mention), std::string::npos) << m;
  }
}

TEST(SafetensorsFuzzTest, EdgeCasesThatAreValid) {
  auto empty = SafetensorsFile::FromBuffer(Build("{}"), "e");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->tensors().empty());
  auto padded = SafetensorsFile::FromBuffer(Build("{\"__metadata__\":{}}    "), "p");
  EXPECT_TRUE(padded.ok()) << padded.status().ToString();
  // Zero-size tensors may sit anywhere, even inside another's range.
  auto zero = SafetensorsFile::FromBuffer(
      Build("{\"a\":{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[3,3]},"
            "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
            "\"c\":{\"dtype\":\"F4\",\"shape\":[4],\"data_offsets\":[8,10]}}", 10),
      "z");
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(zero->Find("a")->nbytes, 0u);
  EXPECT_EQ(zero->ReadBytes(*zero->Find("a"))->size(), 0u);
  EXPECT_EQ(zero->Find("c")->nbytes, 2u);
  // Gaps between tensors and trailing bytes are tolerated.
  const std::string gap_header =
      "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[4,5]}}";
  auto gap = SafetensorsFile::FromBuffer(Build(gap_header, 9), "g");
  ASSERT_TRUE(gap.ok()) << gap.status().ToString();
  EXPECT_EQ(gap->Find("a")->offset, 8u + gap_header.size() + 4u);
}

// A small valid file with several tensors, made by the writer.
std::vector<uint8_t> SeedFile() {
  SafetensorsWriter w;
  w.Add("model.embed_tokens.weight", DType::kBF16, {4, 3}, std::vector<uint8_t>(24, 0x3F));
  w.Add("model.norm.weight", DType::kF32, {3}, std::vector<uint8_t>(12, 0x40));
  w.Add("z", DType::kI64, {0}, {});
  w.Add("b", DType::kU8, {5}, {1, 2, 3, 4, 5});
  std::string path = std::string(LOCKSTEP_BINARY_DIR) + "/io_fuzz_seed.safetensors";
  EXPECT_TRUE(w.WriteFile(path).ok());
  return testing::ReadAll(path);
}

std::vector<uint8_t> Mutate(std::vector<uint8_t> b, std::mt19937_64& rng) {
  auto pick = [&](size_t n) { return n == 0 ? 0 : static_cast<size_t>(rng() % n); };
  const std::string digits = "0123456789";
  switch (rng() % 5) {
    case 0:  // truncate
      b.resize(pick(b.size() + 1));
      break;
    case 1:  // overwrite random bytes anywhere
      for (int i = 0, n = 1 + pick(8); i < n && !b.empty(); ++i) b[pick(b.size())] = rng();
      break;
    case 2:  // change a digit inside the header: shapes and offsets
      for (int i = 0, n = 1 + pick(3); i < n; ++i) {
        size_t at = 8 + pick(b.size() - 8);
        if (at < b.size() && std::isdigit(b[at])) b[at] = digits[pick(10)];
      }
      break;
    case 3:  // change the header length
      b[pick(8)] = rng();
      break;
    default:  // delete or insert a byte inside the header
      size_t at = 8 + pick(b.size() - 8);
      if (rng() & 1) b.erase(b.begin() + at);
      else b.insert(b.begin() + at, static_cast<uint8_t>(rng()));
  }
  return b;
}

// Every accepted mutant must satisfy the reader's invariants.
void CheckInvariants(const SafetensorsFile& f, size_t size) {
  for (const TensorInfo& t : f.tensors()) {
    ASSERT_LE(t.offset, size);
    ASSERT_LE(t.nbytes, size - t.offset);
    auto bytes = f.ReadBytes(t);
    ASSERT_TRUE(bytes.ok());
    uint64_t sum = 0;
    for (uint8_t x : *bytes) sum += x;  // touch every byte
    (void)sum;
    if (t.dtype == DType::kBF16 || t.dtype == DType::kF32) {
      auto v = f.ReadF32(t.name, t.shape);
      ASSERT_TRUE(v.ok());
    }
  }
}

TEST(SafetensorsFuzzTest, RandomMutationsNeverCrash) {
  const std::vector<uint8_t> seed = SeedFile();
  ASSERT_TRUE(SafetensorsFile::FromBuffer(seed, "seed").ok());
  std::mt19937_64 rng(20260101);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::vector<uint8_t> m = Mutate(seed, rng);
    size_t size = m.size();
    auto f = SafetensorsFile::FromBuffer(std::move(m), "mutant");
    if (f.ok()) {
      ++accepted;
      CheckInvariants(*f, size);
    } else {
      ++refused;
      ErrorKind k = f.status().kind();
      ASSERT_EQ(k, ErrorKind::kCorrupt) << f.status().ToString();
    }
  }
  // The generator must really explore both outcomes.
  EXPECT_GT(accepted, 100);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace lockstep
