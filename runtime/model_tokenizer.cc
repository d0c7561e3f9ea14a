#include "runtime/model_tokenizer.h"

#include "engine/tokenizer/bpe_vocabulary.h"

namespace lockstep::runtime {
namespace {

// A string array's strings; Invalid naming the key otherwise.
Result<std::vector<std::string>> Strings(const GgufFile& f, const char* key, bool required) {
  const GgufValue* v = f.Find(key);
  const std::string where = f.path() + ": key \"" + key + "\"";
  if (v == nullptr) {
    if (required) return NotFoundError(where + ": missing, so the file has no tokenizer");
    return std::vector<std::string>{};
  }
  if (v->type != GgufType::kArray || v->element_type != GgufType::kString) {
    return InvalidError(where + ": is not an array of strings");
  }
  return v->strings;
}

Result<std::vector<int32_t>> TokenTypes(const GgufFile& f) {
  const GgufValue* v = f.Find("tokenizer.ggml.token_type");
  if (v == nullptr) return std::vector<int32_t>{};
  const std::string where = f.path() + ": key \"tokenizer.ggml.token_type\"";
  if (v->type != GgufType::kArray || !IsGgufInteger(v->element_type)) {
    return InvalidError(where + ": is not an array of integers");
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i < v->numbers.size(); ++i) {
    const std::optional<int64_t> t = v->IntAt(i);
    if (!t || *t < 0 || *t > 6) return InvalidError(where + "[" + std::to_string(i) + "]: not a token type 0..6");
    out.push_back(static_cast<int32_t>(*t));
  }
  return out;
}

Result<std::string> StringKey(const GgufFile& f, const char* key) {
  const GgufValue* v = f.Find(key);
  const std::string where = f.path() + ": key \"" + key + "\"";
  if (v == nullptr) return NotFoundError(where + ": missing");
  if (v->type != GgufType::kString) return InvalidError(where + ": is not a string");
  return v->string;
}

}  // namespace

Result<Tokenizer> TokenizerFromGguf(const GgufFile& f) {
  BpeVocabulary v;
  LOCKSTEP_ASSIGN_OR_RETURN(v.tokens, Strings(f, "tokenizer.ggml.tokens", true));
  LOCKSTEP_ASSIGN_OR_RETURN(const std::string model, StringKey(f, "tokenizer.ggml.model"));
  if (model != "gpt2") {
    return UnimplementedError(f.path() + ": key \"tokenizer.ggml.model\": \"" + model +
                              "\" is not \"gpt2\" (byte-level BPE); give token ids instead of text");
  }
  LOCKSTEP_ASSIGN_OR_RETURN(v.token_types, TokenTypes(f));
  LOCKSTEP_ASSIGN_OR_RETURN(v.merges, Strings(f, "tokenizer.ggml.merges", true));
  Result<std::string> pre = StringKey(f, "tokenizer.ggml.pre");
  if (!pre.ok() && pre.status().kind() != ErrorKind::kNotFound) return pre.status();
  v.pre = pre.ok() ? *pre : "";
  return TokenizerFromVocabulary(v, f.path());
}

Result<Tokenizer> LoadModelTokenizer(const ModelFiles& files) {
  if (!files.gguf) {
    if (!files.has_tokenizer) return NotFoundError(files.dir + ": the folder has no tokenizer.json");
    return Tokenizer::FromFile(files.tokenizer_path);
  }
  LOCKSTEP_ASSIGN_OR_RETURN(GgufFile f, GgufFile::Open(files.weights_path));
  return TokenizerFromGguf(f);
}

}  // namespace lockstep::runtime
