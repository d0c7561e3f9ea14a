#include "runtime/gguf_convert.h"

#include <bit>
#include <cstring>

#include "base/json.h"
#include "base/read_only_file.h"
#include "engine/io/checkpoint.h"
#include "engine/io/gguf_config.h"
#include "engine/io/gguf_names.h"
#include "engine/io/gguf_writer.h"
#include "engine/io/model_files.h"
#include "engine/rope_table.h"
#include "engine/tokenizer/tokenizer_json.h"

namespace lockstep::runtime {
namespace {

using json = nlohmann::json;
using Keys = std::vector<std::pair<std::string, GgufValue>>;

// Hugging Face's Llama-3 and Qwen2 pre-tokenizer regexes.
constexpr char kHfLlama3Regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr char kHfQwen2Regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool IsByteLevel(const json& j, bool use_regex) {
  return j.is_object() && j.value("type", "") == "ByteLevel" &&
         j.value("add_prefix_space", true) == false && j.value("use_regex", true) == use_regex;
}

// The regex of a Split(Isolated) step, or "".
std::string SplitRegex(const json& j) {
  if (!j.is_object() || j.value("type", "") != "Split" || j.value("behavior", "") != "Isolated" ||
      j.value("invert", false) || !j.contains("pattern") || !j["pattern"].is_object()) {
    return "";
  }
  return j["pattern"].value("Regex", "");
}

// E2.4's `pre` for a tokenizer.json, or "" when none equals it.
std::string PreOf(const json& root) {
  const json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json();
  const json& model = root.contains("model") ? root["model"] : json();
  const bool ignore_merges = model.is_object() && model.value("ignore_merges", false);
  if (IsByteLevel(pre, true)) return ignore_merges ? "" : "gpt-2";
  if (!pre.is_object() || pre.value("type", "") != "Sequence" || !pre.contains("pretokenizers")) {
    return "";
  }
  const json& steps = pre["pretokenizers"];
  if (!steps.is_array() || steps.size() != 2) return "";
  if (steps[0] == json{{"type", "Digits"}, {"individual_digits", true}} && IsByteLevel(steps[1], true)) {
    return ignore_merges ? "" : "smollm";
  }
  if (!IsByteLevel(steps[1], false)) return "";
  const std::string re = SplitRegex(steps[0]);
  if (re == kHfLlama3Regex && ignore_merges) return "llama-bpe";
  if (re == kHfQwen2Regex && !ignore_merges) return "qwen2";
  return "";
}

Status CheckRest(const json& root, const std::string& source) {
  const auto type_of = [&](const char* key) {
    return root.contains(key) && root[key].is_object() ? root[key].value("type", "") : std::string();
  };
  const bool no_normalizer = !root.contains("normalizer") || root["normalizer"].is_null();
  const bool no_post = !root.contains("post_processor") || root["post_processor"].is_null() ||
                       type_of("post_processor") == "ByteLevel";
  if (!no_normalizer || !no_post || type_of("decoder") != "ByteLevel" || type_of("model") != "BPE") {
    return UnimplementedError(source + ": only a BPE tokenizer without normalizer, with ByteLevel "
                                       "decoding, has a GGUF form (E2.4)");
  }
  const json& model = root["model"];
  if (!model.value("unk_token", json()).is_null() || model.value("byte_fallback", false)) {
    return UnimplementedError(source + ": model.unk_token and byte_fallback have no GGUF form (E2.4)");
  }
  return Status::Ok();
}

}  // namespace

Result<Keys> GgufTokenizerKeys(std::string_view text, const std::string& source, uint32_t vocab_size) {
  LOCKSTEP_ASSIGN_OR_RETURN(TokenizerDoc doc, ParseTokenizerJson(text, source));
  LOCKSTEP_RETURN_IF_ERROR(CheckRest(doc.root, source));
  const std::string pre = PreOf(doc.root);
  if (pre.empty()) {
    return UnimplementedError(source + ": its pre-tokenizer is none of E2.4's (smollm, gpt-2, "
                                       "llama-bpe, qwen2)");
  }
  std::vector<std::string> tokens(vocab_size);
  std::vector<int32_t> types(vocab_size, 5);
  auto place = [&](uint32_t id, const std::string& token, int32_t type) -> Status {
    if (id >= vocab_size) {
      return InvalidError(source + ": token id " + std::to_string(id) + " is past the model's " +
                          std::to_string(vocab_size) + " ids");
    }
    tokens[id] = token;
    types[id] = type;
    return Status::Ok();
  };
  for (const auto& [token, id] : doc.vocab) LOCKSTEP_RETURN_IF_ERROR(place(id, token, 1));
  if (doc.root.contains("added_tokens") && doc.root["added_tokens"].is_array()) {
    for (const json& a : doc.root["added_tokens"]) {
      LOCKSTEP_RETURN_IF_ERROR(place(a.value("id", 0u), a.value("content", ""),
                                     a.value("special", false) ? 3 : 4));
    }
  }
  for (uint32_t i = 0; i < vocab_size; ++i) {
    if (types[i] == 5) tokens[i] = "[PAD" + std::to_string(i) + "]";
  }
  std::vector<std::string> merges;
  for (const auto& [a, b] : doc.merges) merges.push_back(a + " " + b);
  return Keys{{"tokenizer.ggml.model", GgufString("gpt2")},
              {"tokenizer.ggml.pre", GgufString(pre)},
              {"tokenizer.ggml.tokens", GgufStrings(std::move(tokens))},
              {"tokenizer.ggml.token_type", GgufI32s(types)},
              {"tokenizer.ggml.merges", GgufStrings(std::move(merges))}};
}

namespace {

// The end-of-sequence ids of the config and the chat template of
// tokenizer_config.json.
Keys SideKeys(const ModelFiles& files, const ModelConfig& cfg) {
  Keys keys;
  const char* names[] = {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                         "tokenizer.ggml.eom_token_id"};
  for (size_t i = 0; i < cfg.eos_token_ids.size() && i < 3; ++i) {
    keys.push_back({names[i], GgufU32(cfg.eos_token_ids[i])});
  }
  keys.push_back({"tokenizer.ggml.add_bos_token", GgufBool(false)});
  // A missing or unreadable tokenizer_config.json leaves the file without a template.
  const std::string path = files.dir + "/tokenizer_config.json";
  Result<std::string> tc = ReadSmallFile(path, kMaxTokenizerConfigBytes, "tokenizer_config.json");
  Result<json> parsed = tc.ok() ? ParseJsonStrict(*tc, path, ErrorKind::kInvalid) : Result<json>(tc.status());
  const json t = parsed.ok() ? *parsed : json();
  if (t.is_object() && t.contains("chat_template") && t["chat_template"].is_string()) {
    keys.push_back({"tokenizer.chat_template", GgufString(t["chat_template"].get<std::string>())});
  }
  return keys;
}

// Bytes of `n` elements of `from` as `to` (an exact conversion).
void Convert(DType from, DType to, std::span<const uint8_t> in, uint8_t* out) {
  if (from == to) {
    std::memcpy(out, in.data(), in.size());
    return;
  }
  WidenToF32(from, in, reinterpret_cast<float*>(out));  // to == F32
}

// One tensor, its units (a matrix's rows, a vector's elements) in GGUF's
// order: unit u of the file is unit HfRowOf(u) of the folder's tensor.
Status AddTensor(GgufWriter& w, const Checkpoint& ckpt, const TensorInfo& t, const std::string& gguf,
                 DType to, int permuted_heads, const std::string& path) {
  if (to != t.dtype && to != DType::kF32) {
    return InvalidError(path + ": tensor \"" + t.name + "\" is " + std::string(DTypeName(t.dtype)) +
                        "; writing it as " + std::string(DTypeName(to)) + " would round");
  }
  const TensorFile* file = ckpt.Find(t.name).file;
  std::vector<uint64_t> ne;
  for (auto d = t.shape.rbegin(); d != t.shape.rend(); ++d) ne.push_back(static_cast<uint64_t>(*d));
  const bool matrix = t.shape.size() == 2;
  const uint64_t unit_elems = matrix ? ne[0] : 1;
  const uint64_t in_unit = DTypeRowBytes(t.dtype, unit_elems), out_unit = DTypeRowBytes(to, unit_elems);
  TensorInfo order = t;
  order.permuted_heads = permuted_heads;
  w.AddTensor(gguf, to, ne, [file, t, order, to, matrix, in_unit, out_unit, permuted_heads](
                                uint64_t r0, std::span<uint8_t> out) -> Status {
    const uint64_t first = matrix ? r0 : 0, units = out.size() / out_unit;
    std::vector<uint8_t> in(static_cast<size_t>((permuted_heads > 0 ? 1 : units) * in_unit));
    if (permuted_heads == 0) {
      LOCKSTEP_RETURN_IF_ERROR(file->Read(t, first * in_unit, in));
      Convert(t.dtype, to, in, out.data());
      return Status::Ok();
    }
    for (uint64_t u = 0; u < units; ++u) {
      LOCKSTEP_RETURN_IF_ERROR(file->Read(t, HfRowOf(order, first + u) * in_unit, in));
      Convert(t.dtype, to, in, out.data() + u * out_unit);
    }
    return Status::Ok();
  });
  return Status::Ok();
}

Result<ModelConfig> ConvertibleConfig(const ModelFiles& files) {
  LOCKSTEP_ASSIGN_OR_RETURN(ModelConfig cfg, LoadModelConfig(files.config_path));
  if (cfg.model_type != "llama" && cfg.model_type != "qwen2") {
    return UnimplementedError(files.config_path + ": model_type \"" + cfg.model_type +
                              "\" is not converted (llama and qwen2 are)");
  }
  if (cfg.rope_scaling) {
    cfg.rope_freqs = Llama3RopeFreqs(cfg);
    cfg.rope_scaling.reset();
  }
  return cfg;
}

}  // namespace

Status ConvertToGguf(const std::string& dir, const std::string& out_path, DType matrices) {
  LOCKSTEP_ASSIGN_OR_RETURN(ModelFiles files, LocateModelFiles(dir));
  if (files.gguf) return InvalidError(dir + ": is a GGUF file already");
  LOCKSTEP_ASSIGN_OR_RETURN(ModelConfig cfg, ConvertibleConfig(files));
  LOCKSTEP_ASSIGN_OR_RETURN(Checkpoint ckpt, Checkpoint::Open(files.weights_path));
  GgufWriter w;
  for (auto& [key, value] : GgufConfigKeys(cfg)) w.Set(key, value);
  if (files.has_tokenizer) {
    LOCKSTEP_ASSIGN_OR_RETURN(std::string text, ReadSmallFile(files.tokenizer_path, kMaxTokenizerFileBytes, "tokenizer.json"));
    LOCKSTEP_ASSIGN_OR_RETURN(Keys keys, GgufTokenizerKeys(text, files.tokenizer_path,
                                                           static_cast<uint32_t>(cfg.vocab_size)));
    for (auto& [key, value] : keys) w.Set(key, value);
    for (auto& [key, value] : SideKeys(files, cfg)) w.Set(key, value);
  }
  const bool llama = cfg.model_type == "llama";
  for (const std::string& name : ckpt.tensor_names()) {
    if (name == "lm_head.weight" && cfg.tie_word_embeddings) continue;  // GGUF: absent = tied
    const std::optional<std::string> gguf = GgufNameOf(name);
    if (!gguf) {
      return UnimplementedError(files.weights_path + ": tensor \"" + name + "\" has no GGUF name (E2.2)");
    }
    const TensorInfo& t = *ckpt.Find(name).info;
    int heads = 0;
    if (llama && gguf->find(".attn_q.") != std::string::npos) heads = cfg.num_heads;
    if (llama && gguf->find(".attn_k.") != std::string::npos) heads = cfg.num_kv_heads;
    const DType to = t.shape.size() == 1 ? DType::kF32 : matrices;
    LOCKSTEP_RETURN_IF_ERROR(AddTensor(w, ckpt, t, *gguf, to, heads, files.weights_path));
  }
  if (!cfg.rope_freqs.empty()) w.AddF32Vector(kGgufRopeFreqs, cfg.rope_freqs);
  return w.Write(out_path);
}

}  // namespace lockstep::runtime
