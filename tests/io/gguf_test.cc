// GgufFile: the header rules of docs/gguf.md one by one, on files built
// field by field, each broken in one place: a clear error naming the file
// and the field, never a crash; and the reader on the conformance
// fixtures and the writer's files.
#include "engine/io/gguf.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <optional>

#include "engine/io/gguf_writer.h"
#include "tests/fixture_absent.h"
#include "tests/io/test_util.h"

namespace lockstep {
namespace {

using testing::Exists;
using testing::ScratchDir;
using testing::SharedPath;

using Bytes = std::vector<uint8_t>;

void Put(Bytes& b, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
Bytes U32(uint32_t v) {
  Bytes b;
  Put(b, v, 4);
  return b;
}
Bytes U64(uint64_t v) {
  Bytes b;
  Put(b, v, 8);
  return b;
}
Bytes Str(const std::string& s) {
  Bytes b = U64(s.size());
  b.insert(b.end(), s.begin(), s.end());
  return b;
}
Bytes Cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
// One key/value pair: key, vtype, raw value bytes.
Bytes Kv(const std::string& key, uint32_t vtype, const Bytes& value) {
  return Cat({Str(key), U32(vtype), value});
}

struct RawTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;  // F32
  uint64_t offset = 0;
};

// A GGUF file written field by field; every field can be broken.
struct RawGguf {
  uint32_t magic = 0x46554747, version = 3;
  std::optional<uint64_t> n_tensors, n_kv;  // override the counts
  std::vector<Bytes> kvs = {Kv("general.architecture", 8, Str("llama"))};
  std::vector<RawTensor> tensors = {{"token_embd.weight", {4, 2}, 0, 0},
                                    {"output_norm.weight", {4}, 0, 32}};
  uint64_t align = 32;
  uint64_t data_bytes = 48;  // the last tensor ends the file

  Bytes Build() const {
    Bytes b = Cat({U32(magic), U32(version), U64(n_tensors.value_or(tensors.size())),
                   U64(n_kv.value_or(kvs.size()))});
    for (const Bytes& kv : kvs) b.insert(b.end(), kv.begin(), kv.end());
    for (const RawTensor& t : tensors) {
      b = Cat({b, Str(t.name), U32(static_cast<uint32_t>(t.ne.size()))});
      for (uint64_t n : t.ne) b = Cat({b, U64(n)});
      b = Cat({b, U32(t.type), U64(t.offset)});
    }
    b.resize((b.size() + align - 1) / align * align, 0);
    for (uint64_t i = 0; i < data_bytes; ++i) b.push_back(static_cast<uint8_t>(i * 7 + 1));
    return b;
  }
};

constexpr char kName[] = "hostile.gguf";

Status Parse(const Bytes& bytes) { return GgufFile::FromBuffer(bytes, kName).status(); }

// The file fails with `kind`, naming the file and every `words`.
void ExpectRefused(const RawGguf& g, ErrorKind kind, std::initializer_list<std::string> words) {
  const Status st = Parse(g.Build());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.kind(), kind) << st.ToString();
  EXPECT_NE(st.message().find(kName), std::string::npos) << st.message();
  for (const std::string& w : words) EXPECT_NE(st.message().find(w), std::string::npos) << st.message();
}

TEST(GgufTest, AValidFileParses) {
  auto f = GgufFile::FromBuffer(RawGguf().Build(), kName);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 32u);
  ASSERT_EQ(f->tensors().size(), 2u);
  const GgufTensor* t = f->FindTensor("token_embd.weight");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, DType::kF32);
  EXPECT_EQ(t->nbytes, 32u);
  EXPECT_EQ(t->offset, f->data_start());
  EXPECT_EQ(f->data_start() % 32, 0u);
  EXPECT_EQ(GgufFile::Info(*t).shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(f->Find("general.architecture")->string, "llama");
  EXPECT_EQ(f->Find("nope"), nullptr);
  RawGguf v2;
  v2.version = 2;  // read the same way
  EXPECT_TRUE(Parse(v2.Build()).ok());
}

TEST(GgufTest, EveryTruncationIsRefusedWithoutACrash) {
  const Bytes whole = RawGguf().Build();
  for (size_t n = 0; n < whole.size(); ++n) {
    const Status st = Parse(Bytes(whole.begin(), whole.begin() + static_cast<ptrdiff_t>(n)));
    ASSERT_FALSE(st.ok()) << n;
    EXPECT_EQ(st.kind(), ErrorKind::kCorrupt) << st.ToString();
    EXPECT_NE(st.message().find(kName), std::string::npos) << st.message();
  }
}

TEST(GgufTest, MagicAndVersion) {
  RawGguf g;
  g.magic = 0x46554746;
  ExpectRefused(g, ErrorKind::kCorrupt, {"not a GGUF file"});
  g = RawGguf();
  g.version = 1;
  ExpectRefused(g, ErrorKind::kUnimplemented, {"version 1"});
  g.version = 4;
  ExpectRefused(g, ErrorKind::kCorrupt, {"version 4"});
  g.version = 0x03000000;  // a big-endian file's version 3
  ExpectRefused(g, ErrorKind::kUnimplemented, {"big-endian"});
}

TEST(GgufTest, AbsurdCountsAreRefusedBeforeAllocating) {
  RawGguf g;
  g.n_kv = uint64_t{1} << 62;
  ExpectRefused(g, ErrorKind::kCorrupt, {"key/value count"});
  g = RawGguf();
  g.n_tensors = uint64_t{1} << 62;
  ExpectRefused(g, ErrorKind::kCorrupt, {"tensor count"});
  g = RawGguf();
  g.n_kv = 1000;  // under the limit, but the file is too short for them
  ExpectRefused(g, ErrorKind::kCorrupt, {"cannot fit"});
}

TEST(GgufTest, AbsurdStringAndArrayLengthsAreRefused) {
  RawGguf g;
  g.kvs = {Cat({U64(uint64_t{1} << 61), Bytes{'k'}})};  // key length
  ExpectRefused(g, ErrorKind::kCorrupt, {"key #0", "over the limit"});
  g.kvs = {Kv("a.b", 8, U64(uint64_t{1} << 40))};  // string value length
  ExpectRefused(g, ErrorKind::kCorrupt, {"key \"a.b\"", "over the limit"});
  g.kvs = {Kv("a.b", 8, Cat({U64(1000), Bytes{'x'}}))};  // past the end
  ExpectRefused(g, ErrorKind::kCorrupt, {"key \"a.b\"", "file ends first"});
  g.kvs = {Kv("a.b", 9, Cat({U32(4), U64(uint64_t{1} << 60)}))};  // array length
  ExpectRefused(g, ErrorKind::kCorrupt, {"key \"a.b\"", "array length"});
  g.kvs = {Kv("a.b", 9, Cat({U32(4), U64(100000)}))};  // fits the limit, not the file
  ExpectRefused(g, ErrorKind::kCorrupt, {"key \"a.b\"", "does not fit"});
  g.kvs = {Kv("a.b", 9, Cat({U32(8), U64(3), Str("x"), U64(uint64_t{1} << 50)}))};
  ExpectRefused(g, ErrorKind::kCorrupt, {"key \"a.b\"[1]", "over the limit"});
  g.kvs = {Kv("", 4, U32(1))};
  ExpectRefused(g, ErrorKind::kCorrupt, {"key #0 is empty"});
}

TEST(GgufTest, ValueTypes) {
  RawGguf g;
  g.kvs = {Kv("a.b", 13, U32(0))};
  ExpectRefused(g, ErrorKind::kCorrupt, {"key \"a.b\"", "unknown value type 13"});
  g.kvs = {Kv("a.b", 9, Cat({U32(9), U64(1), U32(4), U64(0)}))};
  ExpectRefused(g, ErrorKind::kCorrupt, {"key \"a.b\"", "array of arrays"});
  g.kvs = {Kv("a.b", 9, Cat({U32(77), U64(1)}))};
  ExpectRefused(g, ErrorKind::kCorrupt, {"unknown array element type 77"});
  g.kvs = {Kv("a.b", 7, Bytes{2})};
  ExpectRefused(g, ErrorKind::kCorrupt, {"key \"a.b\"", "bool byte is 2"});
  g.kvs = {Kv("a.b", 4, U32(1)), Kv("a.b", 4, U32(2))};
  ExpectRefused(g, ErrorKind::kCorrupt, {"key \"a.b\" appears twice"});
}

TEST(GgufTest, ValuesReadBack) {
  RawGguf g;
  g.kvs = {Kv("i8", 1, Bytes{0xFE}), Kv("u64", 10, U64(~uint64_t{0})),
           Kv("f32", 6, U32(std::bit_cast<uint32_t>(1e-5f))),
           Kv("ints", 9, Cat({U32(5), U64(2), U32(0xFFFFFFFF), U32(7)})),
           Kv("strs", 9, Cat({U32(8), U64(2), Str("a b"), Str("")}))};
  auto f = GgufFile::FromBuffer(g.Build(), kName);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->Find("i8")->Int(), -2);
  EXPECT_EQ(f->Find("u64")->Int(), std::nullopt);  // above INT64_MAX
  EXPECT_EQ(std::bit_cast<float>(static_cast<uint32_t>(f->Find("f32")->bits)), 1e-5f);
  EXPECT_EQ(f->Find("ints")->IntAt(0), -1);
  EXPECT_EQ(f->Find("ints")->IntAt(1), 7);
  EXPECT_EQ(f->Find("strs")->strings, (std::vector<std::string>{"a b", ""}));
}

TEST(GgufTest, TensorDescriptions) {
  RawGguf g;
  g.tensors[1].ne = {};
  ExpectRefused(g, ErrorKind::kCorrupt, {"tensor \"output_norm.weight\"", "n_dims 0"});
  g.tensors[1].ne = {1, 1, 1, 1, 4};
  ExpectRefused(g, ErrorKind::kCorrupt, {"n_dims 5"});
  g.tensors[1].ne = {0};
  ExpectRefused(g, ErrorKind::kCorrupt, {"tensor \"output_norm.weight\"", "ne[0] = 0"});
  g.tensors[1].ne = {4};
  g.tensors[1].type = 99;
  ExpectRefused(g, ErrorKind::kUnimplemented, {"tensor \"output_norm.weight\"", "ggml type 99"});
  g.tensors[1].type = 10;  // Q2_K: a real ggml type E2.3 does not define
  ExpectRefused(g, ErrorKind::kUnimplemented, {"ggml type 10"});
  g.tensors[1].type = 8;  // Q8_0 blocks of 32: 4 elements are not whole blocks
  ExpectRefused(g, ErrorKind::kCorrupt, {"ne[0] = 4 is not a multiple of 32", "Q8_0"});
  g = RawGguf();
  g.tensors[1].name = "token_embd.weight";
  ExpectRefused(g, ErrorKind::kCorrupt, {"tensor \"token_embd.weight\" appears twice"});
  g.tensors[1].name = "blk.0.attn_qq.weight";
  ExpectRefused(g, ErrorKind::kUnimplemented, {"tensor \"blk.0.attn_qq.weight\"", "E2.2"});
  g.tensors[1].name = "blk.01.attn_norm.weight";
  ExpectRefused(g, ErrorKind::kUnimplemented, {"blk.01.attn_norm.weight"});
}

TEST(GgufTest, SizeDisagreeingWithTypeAndShape) {
  RawGguf g;
  g.tensors[1].ne = {4, uint64_t{1} << 62, 16};
  ExpectRefused(g, ErrorKind::kCorrupt, {"tensor \"output_norm.weight\"", "overflows"});
  g.tensors[1].ne = {16};  // 64 bytes at 32 run past the 64-byte data section
  ExpectRefused(g, ErrorKind::kCorrupt, {"tensor \"output_norm.weight\"", "run past the end"});
  g.tensors[1].ne = {4};
  g.tensors[1].type = 30;  // BF16: 8 bytes, fits
  EXPECT_TRUE(Parse(g.Build()).ok());
}

TEST(GgufTest, OffsetsAlignmentAndOverlaps) {
  RawGguf g;
  g.tensors[1].offset = 16;
  ExpectRefused(g, ErrorKind::kCorrupt, {"offset 16 is not a multiple of the alignment 32"});
  g.tensors[1].offset = 0;
  ExpectRefused(g, ErrorKind::kCorrupt, {"overlap"});
  g.tensors[1].offset = 64;  // past the end
  ExpectRefused(g, ErrorKind::kCorrupt, {"run past the end"});
  g = RawGguf();
  g.tensors[0].ne = {8, 2};  // 64 bytes from 0 cover the other tensor at 32
  g.data_bytes = 64;
  ExpectRefused(g, ErrorKind::kCorrupt, {"overlap"});
  g = RawGguf();
  g.kvs.push_back(Kv("general.alignment", 4, U32(48)));
  ExpectRefused(g, ErrorKind::kCorrupt, {"general.alignment", "power of two"});
  g.kvs.back() = Kv("general.alignment", 10, U64(64));
  ExpectRefused(g, ErrorKind::kCorrupt, {"general.alignment", "not a u32"});
  g.kvs.back() = Kv("general.alignment", 4, U32(16));
  g.align = 16;
  g.tensors[1].offset = 48;
  g.data_bytes = 64;
  auto f = GgufFile::FromBuffer(g.Build(), kName);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->alignment(), 16u);
}

TEST(GgufTest, WriterRoundTripsThroughTheReader) {
  GgufWriter w;
  w.Set("general.architecture", GgufString("llama"));
  w.Set("x.count", GgufU32(7));
  w.Set("x.eps", GgufF32(1e-5f));
  w.Set("x.names", GgufStrings({"a", "bc"}));
  w.Set("x.types", GgufI32s({1, -3}));
  Bytes q8(2 * 34, 0x11);
  w.AddTensor("blk.0.attn_q.weight", DType::kQ8_0, {32, 2}, q8);
  w.AddTensor("output_norm.weight", DType::kF32, {3}, [](uint64_t r0, std::span<uint8_t> out) {
    for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(r0 * 4 + i);
    return Status::Ok();
  });
  const std::string path = ScratchDir() + "/w.gguf";
  ASSERT_TRUE(w.Write(path).ok());
  auto f = GgufFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  EXPECT_EQ(f->Find("x.count")->Int(), 7);
  EXPECT_EQ(f->Find("x.names")->strings, (std::vector<std::string>{"a", "bc"}));
  EXPECT_EQ(f->Find("x.types")->IntAt(1), -3);
  const GgufTensor* q = f->FindTensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, DType::kQ8_0);
  EXPECT_EQ(q->nbytes, 68u);
  EXPECT_EQ(*f->ReadBytes(GgufFile::Info(*q)), q8);
  const GgufTensor* n = f->FindTensor("output_norm.weight");
  EXPECT_EQ(n->offset % 32, 0u);
  EXPECT_EQ(*f->ReadBytes(GgufFile::Info(*n)), (Bytes{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(*w.Bytes(), testing::ReadAll(path));
}

TEST(GgufTest, ReadsTheConformanceFixtures) {
  const std::string q8 = SharedPath("fixtures/conformance/tiny-gguf-q8_0/model.gguf");
  const std::string q4 = SharedPath("fixtures/conformance/tiny-gguf-q4_k_m/model.gguf");
  if (!Exists(q8) || !Exists(q4)) LOCKSTEP_FIXTURE_ABSENT() << "GGUF fixtures absent";
  auto a = GgufFile::Open(q8);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->tensors().size(), 21u);
  EXPECT_EQ(a->metadata().size(), 25u);
  EXPECT_EQ(a->data_start(), 13568u);  // header ends at 13542, aligned to 32
  EXPECT_EQ(a->FindTensor("blk.1.attn_v.weight")->dtype, DType::kQ8_0);
  EXPECT_EQ(a->FindTensor("blk.1.attn_v.weight")->offset, 13568u + 146816u);
  EXPECT_EQ(a->Find("tokenizer.ggml.tokens")->strings.size(), 512u);
  auto b = GgufFile::Open(q4);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->FindTensor("token_embd.weight")->dtype, DType::kQ6_K);
  EXPECT_EQ(b->FindTensor("blk.0.ffn_down.weight")->dtype, DType::kQ4_K);
  EXPECT_EQ(b->FindTensor("blk.0.ffn_down.weight")->nbytes, 256u * (512 / 256 * 144));
}

TEST(GgufTest, AFileThatIsNotRegularIsRefusedSayingWhatItIs) {
  auto d = GgufFile::Open(ScratchDir());
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("directory"), std::string::npos) << d.status().ToString();
  EXPECT_EQ(GgufFile::Open(ScratchDir() + "/missing.gguf").status().kind(), ErrorKind::kNotFound);
}

}  // namespace
}  // namespace lockstep
