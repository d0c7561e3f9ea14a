// GGUF files end to end: a folder converted to BF16 GGUF decodes exactly as
// the folder (tokens, per-step logits digests, argmax digest) while its
// CIS2_REF differs through the artifact hashes (E2.5); the GGUF tokenizer
// equals tokenizer.json on the tokenizer vectors' texts; and workers that
// read only their parts of a GGUF file decode as the monolithic run, a
// worker refusing, by tensor name, a file whose bytes in its parts differ.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_runner.h"
#include "engine/io/gguf_writer.h"
#include "engine/io/synthetic_gguf.h"
#include "engine/io/synthetic_model.h"
#include "engine/ops/fp_env.h"
#include "runtime/gguf_convert.h"
#include "runtime/model_tokenizer.h"
#include "runtime_test_util.h"
#include "tests/fixture_absent.h"

namespace lockstep::testing {
namespace {

namespace fs = std::filesystem;

DecodeRequest Request(std::vector<uint32_t> prompt, uint32_t gen) {
  DecodeRequest r;
  r.prompt = std::move(prompt);
  r.gen = gen;
  return r;
}

TEST(GgufConversion, ABf16FolderAndItsGgufDecodeAlike) {
  for (const char* name : {"tiny-llama", "tiny-qwen"}) {
    SCOPED_TRACE(name);
    const std::string folder = SharedPath(std::string("fixtures/conformance/") + name);
    if (folder.empty()) LOCKSTEP_FIXTURE_ABSENT() << "conformance fixtures absent";
    const std::string gguf = MakeTempDir("convert") + "/model.gguf";
    const Status st = runtime::ConvertToGguf(folder, gguf, DType::kBF16);
    ASSERT_TRUE(st.ok()) << st.ToString();
    const DecodeRequest req = Request({5, 77, 300, 12, 9, 41, 2, 18}, 12);
    const DecodeResult want = Monolithic(folder, req);
    const DecodeResult got = Monolithic(gguf, req);
    EXPECT_EQ(got.prompt, want.prompt);
    EXPECT_EQ(got.generated, want.generated);
    EXPECT_EQ(got.logits_sha256, want.logits_sha256);
    EXPECT_EQ(got.argmax_digest, want.argmax_digest);
    EXPECT_NE(got.cis2_ref, want.cis2_ref) << "the chain names the .gguf file";
    // The same text gives the same ids through either tokenizer.
    auto files_a = LocateModelFiles(folder);
    auto files_b = LocateModelFiles(gguf);
    auto a = runtime::LoadModelTokenizer(*files_a);
    auto b = runtime::LoadModelTokenizer(*files_b);
    ASSERT_TRUE(a.ok() && b.ok()) << b.status().ToString();
    const std::string text = "Once upon a time, in 2024, a fox said: \"hi\" <|im_end|>";
    EXPECT_EQ(b->Encode(text), a->Encode(text));
  }
}

TEST(GgufConversion, OnlyExactConversions) {
  const std::string folder = SharedPath("fixtures/conformance/tiny-llama");
  if (folder.empty()) LOCKSTEP_FIXTURE_ABSENT() << "conformance fixtures absent";
  const std::string dir = MakeTempDir("convert_f16");
  const Status st = runtime::ConvertToGguf(folder, dir + "/m.gguf", DType::kF16);
  EXPECT_EQ(st.kind(), ErrorKind::kInvalid) << st.ToString();
  EXPECT_NE(st.message().find("would round"), std::string::npos) << st.ToString();
  EXPECT_FALSE(fs::exists(dir + "/m.gguf"));
  // F32 holds every BF16 value: the same decode.
  ASSERT_TRUE(runtime::ConvertToGguf(folder, dir + "/f32.gguf", DType::kF32).ok());
  const DecodeRequest req = Request({1, 2, 3, 4}, 6);
  EXPECT_EQ(Monolithic(dir + "/f32.gguf", req).logits_sha256, Monolithic(folder, req).logits_sha256);
}

// The GGUF form of a tokenizer.json, tokens and merges as metadata.
Result<Tokenizer> ThroughGguf(const std::string& json_text, uint32_t vocab, const std::string& dir) {
  LOCKSTEP_ASSIGN_OR_RETURN(auto keys, runtime::GgufTokenizerKeys(json_text, "tokenizer.json", vocab));
  GgufWriter w;
  for (auto& [k, v] : keys) w.Set(k, v);
  const std::string path = dir + "/tok.gguf";
  LOCKSTEP_RETURN_IF_ERROR(w.Write(path));
  LOCKSTEP_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(path));
  return runtime::TokenizerFromGguf(f);
}

std::vector<std::string> VectorTexts() {
  std::ifstream in(SharedPath("fixtures/conformance/tokenizer-vectors.json"));
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::vector<std::string> texts;
  for (const auto& c : doc["cases"]) texts.push_back(c["text"].get<std::string>());
  texts.push_back("It's a DON'T-can't 'LL 'Re 12345678 x\r\n\n  y\t\tz  ");
  return texts;
}

// SmolLM2's tokenizer.json with its pre-tokenizer swapped for one of E2.4's.
std::string WithPre(const std::string& json_text, const std::string& pre) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(json_text);
  const nlohmann::ordered_json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                                             {"trim_offsets", true}, {"use_regex", pre == "gpt-2"}};
  const char* llama3 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const char* qwen2 =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  if (pre == "gpt-2") {
    j["pre_tokenizer"] = byte_level;
  } else if (pre != "smollm") {
    const nlohmann::ordered_json split = {
        {"type", "Split"},
        {"pattern", {{"Regex", pre == "llama-bpe" ? llama3 : qwen2}}},
        {"behavior", "Isolated"},
        {"invert", false}};
    j["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", nlohmann::ordered_json::array({split, byte_level})}};
    j["model"]["ignore_merges"] = pre == "llama-bpe";
  }
  return j.dump();
}

TEST(GgufTokenizer, EqualsTokenizerJsonOnTheVectorTexts) {
  const std::string smol = SharedPath("fixtures/smollm2-135m/tokenizer.json");
  if (smol.empty()) LOCKSTEP_FIXTURE_ABSENT() << "SmolLM2 tokenizer absent";
  std::ifstream in(smol, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::vector<std::string> texts = VectorTexts();
  for (const char* pre : {"smollm", "gpt-2", "llama-bpe", "qwen2"}) {
    SCOPED_TRACE(pre);
    const std::string json_text = WithPre(text, pre);
    auto want = Tokenizer::FromJson(json_text, "tokenizer.json");
    ASSERT_TRUE(want.ok()) << want.status().ToString();
    auto got = ThroughGguf(json_text, 49152, MakeTempDir("gguf_tok"));
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    for (const std::string& t : texts) {
      EXPECT_EQ(got->Encode(t), want->Encode(t)) << t;
      EXPECT_EQ(got->Decode(want->Encode(t)), want->Decode(want->Encode(t))) << t;
    }
  }
}

TEST(GgufTokenizer, TheVectorsIdsThroughGguf) {
  const std::string smol = SharedPath("fixtures/smollm2-135m/tokenizer.json");
  if (smol.empty()) LOCKSTEP_FIXTURE_ABSENT() << "SmolLM2 tokenizer absent";
  std::ifstream in(smol, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto tok = ThroughGguf(text, 49152, MakeTempDir("gguf_tok_ids"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::ifstream vin(SharedPath("fixtures/conformance/tokenizer-vectors.json"));
  const nlohmann::json doc = nlohmann::json::parse(vin);
  size_t checked = 0;
  for (const auto& c : doc["cases"]) {
    EXPECT_EQ(tok->Encode(c["text"].get<std::string>()), c["ids"].get<std::vector<uint32_t>>())
        << c["text"];
    ++checked;
  }
  EXPECT_GT(checked, 5u);
}

TEST(GgufTokenizer, WhatItRefuses) {
  const std::string dir = MakeTempDir("gguf_tok_refused");
  auto open = [&](const std::vector<std::pair<std::string, GgufValue>>& keys) {
    GgufWriter w;
    for (const auto& [k, v] : keys) w.Set(k, v);
    EXPECT_TRUE(w.Write(dir + "/t.gguf").ok());
    return runtime::TokenizerFromGguf(*GgufFile::Open(dir + "/t.gguf")).status();
  };
  const std::vector<std::pair<std::string, GgufValue>> base = {
      {"tokenizer.ggml.model", GgufString("gpt2")},
      {"tokenizer.ggml.tokens", GgufStrings({"a", "b", "ab"})},
      {"tokenizer.ggml.merges", GgufStrings({"a b"})}};
  auto with = [&](std::pair<std::string, GgufValue> kv) {
    auto keys = base;
    keys.push_back(std::move(kv));
    return keys;
  };
  EXPECT_TRUE(open(with({"tokenizer.ggml.pre", GgufString("gpt-2")})).ok());
  for (const char* pre : {"default", "falcon"}) {
    const Status st = open(with({"tokenizer.ggml.pre", GgufString(pre)}));
    EXPECT_EQ(st.kind(), ErrorKind::kUnimplemented) << st.ToString();
    EXPECT_NE(st.message().find(pre), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(open(base).kind(), ErrorKind::kUnimplemented);  // no pre at all
  auto llama = base;
  llama[0] = {"tokenizer.ggml.model", GgufString("llama")};
  llama.push_back({"tokenizer.ggml.pre", GgufString("gpt-2")});
  EXPECT_NE(open(llama).message().find("give token ids"), std::string::npos);
  auto bad_merge = with({"tokenizer.ggml.pre", GgufString("gpt-2")});
  bad_merge[2] = {"tokenizer.ggml.merges", GgufStrings({"a c"})};
  EXPECT_NE(open(bad_merge).message().find("tokenizer.ggml.merges[0]"), std::string::npos);
}

// Three workers over a Q4_K_M GGUF file: each reads only its parts.
class GgufWorkers : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(MakeTempDir("gguf_workers") + "/model.gguf");
    SyntheticShape s;
    s.hidden = 256, s.inter = 512, s.layers = 6;
    s.untied = true;
    auto cfg = ParseModelConfig(SyntheticConfigJson(s), "shape");
    ASSERT_TRUE(WriteSyntheticGguf(*path_, *cfg, false, *GgufQuantMixByName("q4_k_m"), 17, {}).ok());
  }
  static void TearDownTestSuite() { delete path_; }
  void SetUp() override { ASSERT_TRUE(ops::PinFpEnvironment().ok()); }

  static std::vector<LayerRange> Plan() { return {{0, 2}, {2, 4}, {4, 6}}; }

  // Runs the plan with worker 1 reading `worker_path`.
  static Result<DecodeResult> RunWith(const std::string& worker_path) {
    InProcCluster cluster(3, [&](size_t i, WorkerOptions& o) {
      if (i == 1) o.model_dir_override = worker_path;
    });
    LOCKSTEP_ASSIGN_OR_RETURN(auto c, Coordinator::Start(cluster.context(),
                                                         cluster.Config(*path_, Plan())));
    LOCKSTEP_ASSIGN_OR_RETURN(auto session, c->OpenSession(std::nullopt));
    return RunDecode(*session, Req(), c->seed());
  }
  static DecodeRequest Req() { return Request({5, 9, 100, 17}, 6); }

  // A copy with one byte of `tensor`'s bytes flipped.
  static std::string Damaged(const std::string& tensor) {
    const std::string copy = MakeTempDir("gguf_damaged") + "/model.gguf";
    fs::copy_file(*path_, copy);
    auto f = GgufFile::Open(copy);
    const GgufTensor* t = f->FindTensor(tensor);
    std::fstream io(copy, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(static_cast<std::streamoff>(t->offset + t->nbytes / 2));
    char c = 0;
    io.get(c);
    io.seekp(static_cast<std::streamoff>(t->offset + t->nbytes / 2));
    io.put(static_cast<char>(c ^ 1));
    return copy;
  }

  static std::string* path_;
};
std::string* GgufWorkers::path_ = nullptr;

TEST_F(GgufWorkers, ShardedEqualsMonolithic) {
  const DecodeResult want = Monolithic(*path_, Req());
  auto got = RunWith(*path_);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ExpectSameDecode(*got, want);
}

TEST_F(GgufWorkers, ADamagedPartOfItsOwnIsRefusedByName) {
  auto r = RunWith(Damaged("blk.3.ffn_up.weight"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().kind(), ErrorKind::kMismatch) << r.status().ToString();
  EXPECT_NE(r.status().message().find("model.gguf:blk.3.ffn_up.weight: sha256 expected"),
            std::string::npos)
      << r.status().ToString();
}

TEST_F(GgufWorkers, BytesOutsideItsPartsAreNeverRead) {
  // Another stage's tensor damaged in the copy worker 1 reads: it serves.
  const DecodeResult want = Monolithic(*path_, Req());
  auto r = RunWith(Damaged("blk.0.ffn_up.weight"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ExpectSameDecode(*r, want);
}

}  // namespace
}  // namespace lockstep::testing
