#include "engine/tokenizer/bpe_vocabulary.h"

#include <unordered_set>

#include "engine/tokenizer/tokenizer_json.h"

namespace lockstep {
namespace {

using json = nlohmann::json;

// llama.cpp src/llama-vocab.cpp, verbatim (E2.4).
constexpr char kLlama3Regex[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
constexpr char kQwen2Regex[] =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

constexpr int32_t kControl = 3, kUserDefined = 4, kUnused = 5;

json ByteLevel(bool use_regex) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
          {"use_regex", use_regex}};
}

json Split(const char* regex) {
  return {{"type", "Split"}, {"pattern", {{"Regex", regex}}}, {"behavior", "Isolated"},
          {"invert", false}};
}

json Sequence(json a, json b) {
  return {{"type", "Sequence"}, {"pretokenizers", json::array({std::move(a), std::move(b)})}};
}

// (pre_tokenizer, ignore_merges) for a `pre` name.
Result<std::pair<json, bool>> PreTokenizerFor(const std::string& pre, const std::string& src) {
  if (pre == "smollm") {
    return std::make_pair(Sequence({{"type", "Digits"}, {"individual_digits", true}}, ByteLevel(true)),
                          false);
  }
  if (pre == "gpt-2") return std::make_pair(ByteLevel(true), false);
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3") {
    return std::make_pair(Sequence(Split(kLlama3Regex), ByteLevel(false)), true);
  }
  if (pre == "qwen2" || pre == "deepseek-r1-qwen") {
    return std::make_pair(Sequence(Split(kQwen2Regex), ByteLevel(false)), false);
  }
  return UnimplementedError(src + ": tokenizer.ggml.pre \"" + pre +
                            "\" is not one of smollm, gpt-2, llama-bpe (llama3, llama-v3), "
                            "qwen2 (deepseek-r1-qwen)");
}

int32_t TypeOf(const BpeVocabulary& v, size_t i) {
  return v.token_types.empty() ? 1 : v.token_types[i];
}

// Vocabulary entries and added tokens (E2.4).
Status AddTokens(const BpeVocabulary& v, const std::string& src, TokenizerDoc& doc) {
  if (!v.token_types.empty() && v.token_types.size() != v.tokens.size()) {
    return InvalidError(src + ": tokenizer.ggml.token_type has " +
                        std::to_string(v.token_types.size()) + " entries for " +
                        std::to_string(v.tokens.size()) + " tokens");
  }
  json added = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const int32_t type = TypeOf(v, i);
    if (type == kUnused) continue;
    const uint32_t id = static_cast<uint32_t>(i);
    doc.vocab.emplace_back(v.tokens[i], id);
    if (type == kControl || type == kUserDefined) {
      added.push_back({{"id", id}, {"content", v.tokens[i]}, {"single_word", false},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                       {"special", type == kControl}});
    }
  }
  doc.has_vocab = true;
  doc.root["added_tokens"] = std::move(added);
  return Status::Ok();
}

// "A B" split at its one space; A, B and AB vocabulary entries.
Status AddMerges(const BpeVocabulary& v, const std::string& src, TokenizerDoc& doc) {
  std::unordered_set<std::string_view> vocab;
  for (const auto& [token, id] : doc.vocab) vocab.insert(token);
  for (size_t r = 0; r < v.merges.size(); ++r) {
    const std::string& m = v.merges[r];
    const std::string where = src + ": tokenizer.ggml.merges[" + std::to_string(r) + "] \"" + m + "\"";
    const size_t space = m.find(' ');
    if (space == std::string::npos || m.find(' ', space + 1) != std::string::npos) {
      return InvalidError(where + ": not two tokens separated by one space");
    }
    std::string a = m.substr(0, space), b = m.substr(space + 1);
    if (!vocab.count(a) || !vocab.count(b) || !vocab.count(a + b)) {
      return InvalidError(where + ": its tokens and their concatenation must be vocabulary entries");
    }
    doc.merges.emplace_back(std::move(a), std::move(b));
  }
  doc.has_merges = true;
  return Status::Ok();
}

}  // namespace

Result<Tokenizer> TokenizerFromVocabulary(const BpeVocabulary& v, const std::string& source) {
  LOCKSTEP_ASSIGN_OR_RETURN(auto pre, PreTokenizerFor(v.pre, source));
  TokenizerDoc doc;
  doc.root = {{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"normalizer", nullptr},
              {"pre_tokenizer", std::move(pre.first)},
              {"post_processor", nullptr},
              {"decoder", ByteLevel(true)},
              {"model",
               {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr},
                {"continuing_subword_prefix", nullptr}, {"end_of_word_suffix", nullptr},
                {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", pre.second}}}};
  LOCKSTEP_RETURN_IF_ERROR(AddTokens(v, source, doc));
  LOCKSTEP_RETURN_IF_ERROR(AddMerges(v, source, doc));
  return Tokenizer::FromDoc(std::move(doc), source);
}

}  // namespace lockstep
