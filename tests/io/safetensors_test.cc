#include "engine/io/safetensors.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <fstream>

#include "base/sha256.h"
#include "tests/fixture_absent.h"
#include "tests/io/test_util.h"

namespace lockstep {
namespace {

using testing::ReadAll;
using testing::ScratchDir;
using testing::SharedPath;

std::vector<uint8_t> U16Le(const std::vector<uint16_t>& v) {
  std::vector<uint8_t> out;
  for (uint16_t x : v) {
    out.push_back(static_cast<uint8_t>(x & 0xFF));
    out.push_back(static_cast<uint8_t>(x >> 8));
  }
  return out;
}

std::vector<uint8_t> U32Le(const std::vector<uint32_t>& v) {
  std::vector<uint8_t> out;
  for (uint32_t x : v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(x >> (8 * i)));
  }
  return out;
}

SafetensorsFile MustOpen(const std::string& path) {
  auto f = SafetensorsFile::Open(path);
  EXPECT_TRUE(f.ok()) << f.status().ToString();
  return std::move(f).value();
}

TEST(SafetensorsTest, WriterRoundTrip) {
  std::string path = ScratchDir() + "/t.safetensors";
  SafetensorsWriter w;
  w.Add("zeta", DType::kF32, {2}, U32Le({0x3F800000, 0x7FC00123}));
  w.Add("alpha", DType::kBF16, {3, 1}, U16Le({0x3F80, 0x8000, 0x0001}));
  w.Add("empty", DType::kBF16, {0, 5}, {});
  w.Add("ids", DType::kI64, {}, std::vector<uint8_t>(8, 7));
  ASSERT_TRUE(w.WriteFile(path).ok());

  SafetensorsFile f = MustOpen(path);
  EXPECT_EQ(f.path(), path);
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.tensors()[0].name, "alpha");
  EXPECT_EQ(f.tensors()[1].name, "empty");
  EXPECT_EQ(f.tensors()[2].name, "ids");
  EXPECT_EQ(f.tensors()[3].name, "zeta");
  const TensorInfo* a = f.Find("alpha");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kBF16);
  EXPECT_EQ(a->shape, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(a->nbytes, 6u);
  EXPECT_EQ(a->offset % 8, 0u) << "data section must start 8-byte aligned";
  EXPECT_EQ(*f.ReadBytes(*a),
            U16Le({0x3F80, 0x8000, 0x0001}));
  // Contiguous, in name order.
  EXPECT_EQ(f.Find("empty")->offset, a->offset + 6);
  EXPECT_EQ(f.Find("ids")->offset, a->offset + 6);
  EXPECT_EQ(f.Find("zeta")->offset, a->offset + 14);
  EXPECT_EQ(f.Find("ids")->shape, std::vector<int64_t>{});
  EXPECT_EQ(f.Find("nope"), nullptr);
  EXPECT_EQ(f.Find("alph"), nullptr);

  std::vector<uint8_t> raw = ReadAll(path);
  std::string head(raw.begin() + 8, raw.begin() + 8 + 31);
  EXPECT_EQ(head, "{\"__metadata__\":{\"format\":\"pt\"}");
  EXPECT_EQ(raw.size(), a->offset + 22);
}

TEST(SafetensorsTest, WriterReproducesHuggingFaceFileByteForByte) {
  std::string src = SharedPath("fixtures/conformance/tiny-llama/model.safetensors");
  if (!testing::Exists(src)) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << src;
  SafetensorsFile in = MustOpen(src);
  SafetensorsWriter w;
  for (const TensorInfo& t : in.tensors()) {
    w.Add(t.name, t.dtype, t.shape, *in.ReadBytes(t));
  }
  std::string out = ScratchDir() + "/copy.safetensors";
  ASSERT_TRUE(w.WriteFile(out).ok());
  EXPECT_EQ(ToHex(*Sha256File(out)), ToHex(*Sha256File(src)));
}

TEST(SafetensorsTest, WriterRefusesDuplicateAndMissizedTensors) {
  std::string dir = ScratchDir();
  SafetensorsWriter dup;
  dup.Add("x", DType::kU8, {1}, {1});
  dup.Add("x", DType::kU8, {1}, {2});
  Status st = dup.WriteFile(dir + "/dup.safetensors");
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_NE(st.message().find("\"x\""), std::string::npos) << st.message();
  SafetensorsWriter bad;
  bad.Add("y", DType::kBF16, {2}, {1, 2, 3});
  EXPECT_EQ(bad.WriteFile(dir + "/bad.safetensors").kind(), ErrorKind::kInvalid);
  EXPECT_FALSE(testing::Exists(dir + "/dup.safetensors"));
  EXPECT_FALSE(testing::Exists(dir + "/bad.safetensors"));
}

TEST(SafetensorsTest, WriterReportsUnwritableDirectory) {
  SafetensorsWriter w;
  w.Add("x", DType::kU8, {1}, {1});
  Status st = w.WriteFile(ScratchDir() + "/no/such/dir/x.safetensors");
  EXPECT_EQ(st.kind(), ErrorKind::kIo);
  EXPECT_NE(st.message().find("no/such/dir"), std::string::npos);
}

// §4.1 on every special class of bit pattern; "a" (1 byte) puts "b" at an
// odd file offset so the reader must not rely on alignment.
TEST(SafetensorsTest, Bf16WideningIsTheExactShift) {
  const std::vector<uint16_t> bits = {
      0x0000, 0x8000,  // +0, -0
      0x7F80, 0xFF80,  // +inf, -inf
      0x7FC0, 0xFFC1, 0x7F81, 0xFFFF,  // quiet/signalling NaNs with payloads
      0x0001, 0x807F, 0x0040,  // subnormals
      0x3F80, 0xBF80, 0x7F7F, 0x0080, 0x4049};
  SafetensorsWriter w;
  w.Add("a", DType::kU8, {1}, {0xAB});
  w.Add("b", DType::kBF16, {2, 8}, U16Le(bits));
  std::string path = ScratchDir() + "/w.safetensors";
  ASSERT_TRUE(w.WriteFile(path).ok());
  SafetensorsFile f = MustOpen(path);
  EXPECT_EQ(f.Find("b")->offset % 2, 1u);
  const int64_t shape[] = {2, 8};
  auto v = f.ReadF32("b", shape);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  ASSERT_EQ(v->size(), bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>((*v)[i]), uint32_t{bits[i]} << 16)
        << "element " << i;
  }
  EXPECT_TRUE(std::signbit((*v)[1]));
  EXPECT_TRUE(std::isnan((*v)[5]));
  EXPECT_EQ((*v)[11], 1.0f);
}

TEST(SafetensorsTest, F32IsCopiedBitForBit) {
  const std::vector<uint32_t> bits = {0x80000000, 0x7FA00001, 0xFFC00002,
                                      0x00000001, 0x7F800000, 0x3EAAAAAB};
  SafetensorsWriter w;
  w.Add("a", DType::kU8, {3}, {1, 2, 3});
  w.Add("f", DType::kF32, {6}, U32Le(bits));
  std::string path = ScratchDir() + "/f.safetensors";
  ASSERT_TRUE(w.WriteFile(path).ok());
  SafetensorsFile f = MustOpen(path);
  const int64_t shape[] = {6};
  auto v = f.ReadF32("f", shape);
  ASSERT_TRUE(v.ok());
  for (size_t i = 0; i < bits.size(); ++i) {
    EXPECT_EQ(std::bit_cast<uint32_t>((*v)[i]), bits[i]) << "element " << i;
  }
}

TEST(SafetensorsTest, ReadF32Errors) {
  SafetensorsWriter w;
  w.Add("m.w", DType::kBF16, {2, 3}, std::vector<uint8_t>(12, 0));
  w.Add("m.h", DType::kF64, {2}, std::vector<uint8_t>(16, 0));
  w.Add("m.f16", DType::kF16, {2}, {0x00, 0x3C, 0x01, 0x80});  // 1.0, -2^-24
  std::string path = ScratchDir() + "/e.safetensors";
  ASSERT_TRUE(w.WriteFile(path).ok());
  SafetensorsFile f = MustOpen(path);

  const int64_t wrong[] = {3, 2};
  Status st = f.ReadF32("m.w", wrong).status();
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid);
  EXPECT_NE(st.message().find("m.w"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[2, 3]"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("[3, 2]"), std::string::npos) << st.message();
  const int64_t fewer[] = {2};
  EXPECT_EQ(f.ReadF32("m.w", fewer).status().kind(), ErrorKind::kInvalid);
  EXPECT_EQ(f.ReadF32("m.w", {2, 3, 1}).status().kind(), ErrorKind::kInvalid);
  EXPECT_TRUE(f.ReadF32("m.w", {2, 3}).ok());
  std::vector<int64_t> as_vector = {2, 3};
  EXPECT_TRUE(f.ReadF32("m.w", as_vector).ok());

  const int64_t two[] = {2};
  st = f.ReadF32("m.h", two).status();
  EXPECT_EQ(st.kind(), ErrorKind::kUnimplemented);
  EXPECT_NE(st.message().find("m.h"), std::string::npos);
  EXPECT_NE(st.message().find("F64"), std::string::npos);
  auto f16 = f.ReadF32("m.f16", two);
  ASSERT_TRUE(f16.ok());
  EXPECT_EQ((*f16)[0], 1.0f);
  EXPECT_EQ((*f16)[1], -std::ldexp(1.0f, -24));

  st = f.ReadF32("m.x", two).status();
  EXPECT_EQ(st.kind(), ErrorKind::kNotFound);
  EXPECT_NE(st.message().find("m.x"), std::string::npos);
}

TEST(SafetensorsTest, OpenMissingFileIsNotFound) {
  auto f = SafetensorsFile::Open(ScratchDir() + "/absent.safetensors");
  EXPECT_EQ(f.status().kind(), ErrorKind::kNotFound);
  EXPECT_NE(f.status().message().find("absent.safetensors"), std::string::npos);
}

TEST(SafetensorsTest, OpenEmptyOrTruncatedFileIsCorrupt) {
  std::string dir = ScratchDir();
  { std::ofstream(dir + "/empty.safetensors"); }
  auto f = SafetensorsFile::Open(dir + "/empty.safetensors");
  EXPECT_EQ(f.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(f.status().message().find("empty.safetensors"), std::string::npos);

  SafetensorsWriter w;
  w.Add("t", DType::kBF16, {64}, std::vector<uint8_t>(128, 1));
  ASSERT_TRUE(w.WriteFile(dir + "/full.safetensors").ok());
  std::vector<uint8_t> bytes = ReadAll(dir + "/full.safetensors");
  bytes.pop_back();
  std::ofstream(dir + "/cut.safetensors", std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  f = SafetensorsFile::Open(dir + "/cut.safetensors");
  EXPECT_EQ(f.status().kind(), ErrorKind::kCorrupt);
  EXPECT_NE(f.status().message().find("cut.safetensors"), std::string::npos);
  EXPECT_NE(f.status().message().find("\"t\""), std::string::npos) << f.status().message();
}

TEST(SafetensorsTest, OpenDirectoryIsIo) {
  auto f = SafetensorsFile::Open(ScratchDir());
  EXPECT_EQ(f.status().kind(), ErrorKind::kIo);
}

TEST(SafetensorsTest, MovedFileKeepsItsData) {
  SafetensorsWriter w;
  w.Add("x", DType::kBF16, {1}, U16Le({0x4000}));
  std::string path = ScratchDir() + "/m.safetensors";
  ASSERT_TRUE(w.WriteFile(path).ok());
  SafetensorsFile a = MustOpen(path);
  SafetensorsFile b = std::move(a);
  const int64_t one[] = {1};
  auto v = b.ReadF32("x", one);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ((*v)[0], 2.0f);
}

TEST(SafetensorsTest, ConformanceCheckpointsOpen) {
  for (const char* m : {"tiny-llama", "tiny-qwen", "tiny-daz"}) {
    std::string p = SharedPath(std::string("fixtures/conformance/") + m +
                               "/model.safetensors");
    if (!testing::Exists(p)) LOCKSTEP_FIXTURE_ABSENT() << "fixture absent: " << p;
    SafetensorsFile f = MustOpen(p);
    EXPECT_NE(f.Find("model.embed_tokens.weight"), nullptr) << m;
    EXPECT_NE(f.Find("model.norm.weight"), nullptr) << m;
  }
}

TEST(DTypeTest, NamesAndSizes) {
  EXPECT_EQ(ParseDType("BF16"), DType::kBF16);
  EXPECT_EQ(ParseDType("F8_E4M3"), DType::kF8E4M3);
  EXPECT_EQ(ParseDType("bf16"), std::nullopt);
  EXPECT_EQ(ParseDType(""), std::nullopt);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kF64), 8);
  EXPECT_EQ(DTypeSize(DType::kI64), 8);
  EXPECT_EQ(DTypeSize(DType::kBool), 1);
  EXPECT_EQ(DTypeSize(DType::kF4), 0);
  EXPECT_EQ(DTypeBits(DType::kF4), 4);
  EXPECT_EQ(DTypeBits(DType::kF6E2M3), 6);
  for (DType d : {DType::kBool, DType::kU8, DType::kI8, DType::kF8E5M2,
                  DType::kF8E4M3, DType::kF8E8M0, DType::kI16, DType::kU16,
                  DType::kF16, DType::kBF16, DType::kI32, DType::kU32,
                  DType::kF32, DType::kF64, DType::kI64, DType::kU64,
                  DType::kC64, DType::kF4, DType::kF6E2M3, DType::kF6E3M2}) {
    EXPECT_EQ(ParseDType(DTypeName(d)), d) << DTypeName(d);
  }
}

}  // namespace
}  // namespace lockstep
