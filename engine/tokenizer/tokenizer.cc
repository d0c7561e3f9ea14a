#include "engine/tokenizer/tokenizer.h"

#include <cassert>
#include <filesystem>

#include <unicode/unistr.h>
#include <unicode/utf16.h>
#include <unicode/utf8.h>

#include "base/read_only_file.h"
#include "engine/tokenizer/added_tokens.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/byte_unicode.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tokenizer_json.h"
#include "engine/tokenizer/utf8.h"

namespace lockstep {

struct Tokenizer::Impl {
  TextNormalizer normalizer;
  AddedVocabulary added;
  PreTokenizerChain chain;
  BpeModel model;
  uint32_t vocab_size = 0;
  // [vocab_size]: what the ByteLevel decoder makes of each id (empty for an
  // unknown id, which Decode skips), computed once so Decode is a
  // concatenation. A streaming server decodes a growing answer per token.
  std::vector<std::string> id_bytes;

  // Pre-tokenizes and BPE-encodes one segment free of added tokens.
  void EncodeText(std::string_view text, WordCache* cache, std::vector<uint32_t>* ids) const;
  // Normalizes one raw segment, cuts normalized added tokens, encodes.
  void EncodeRawSegment(std::string_view text, WordCache* cache,
                        std::vector<uint32_t>* ids) const;
};

namespace {

using json = nlohmann::json;

Status Unimplemented(const std::string& where, const std::string& what) {
  return UnimplementedError(where + ": " + what + " is not supported");
}

// "type" of a config object, or "" when absent.
std::string TypeOf(const json& j) {
  if (!j.is_object()) return "";
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

const json& Field(const json& obj, const char* key) {
  static const json kNull;
  auto it = obj.find(key);
  return it == obj.end() ? kNull : *it;
}

Status CheckTopLevel(const json& root, const std::string& src) {
  const json& version = Field(root, "version");
  if (!version.is_null() && version != "1.0") {
    return InvalidError(src + ": version: expected \"1.0\", got " + version.dump());
  }
  for (const char* key : {"truncation", "padding"}) {
    if (!Field(root, key).is_null()) return Unimplemented(src + ": " + key, "a non-null value");
  }
  const json& post = Field(root, "post_processor");
  if (!post.is_null() && TypeOf(post) != "ByteLevel") {
    return Unimplemented(src + ": post_processor", "post-processor \"" + TypeOf(post) + "\"");
  }
  const json& decoder = Field(root, "decoder");
  if (TypeOf(decoder) != "ByteLevel") {
    return Unimplemented(src + ": decoder", decoder.is_null() ? std::string("a null decoder")
                                                              : "decoder \"" + TypeOf(decoder) + "\"");
  }
  return Status::Ok();
}

// Null and "" both mean "no affix" in the crate.
bool IsUnsetString(const json& j) {
  return j.is_null() || (j.is_string() && j.get<std::string>().empty());
}

Result<BpeOptions> ParseBpeOptions(const json& model, const std::string& where) {
  if (TypeOf(model) != "BPE") {
    if (!model.is_object()) return InvalidError(where + ": missing or not an object");
    return Unimplemented(where + ".type", "model type \"" + TypeOf(model) + "\"");
  }
  const json& dropout = Field(model, "dropout");
  if (!dropout.is_null() && !(dropout.is_number() && dropout.get<double>() == 0.0)) {
    return Unimplemented(where + ".dropout", "a non-null dropout");
  }
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (!IsUnsetString(Field(model, key))) return Unimplemented(where + "." + key, "a non-empty value");
  }
  BpeOptions options;
  const json& unk = Field(model, "unk_token");
  if (unk.is_string()) {
    options.unk_token = unk.get<std::string>();
  } else if (!unk.is_null()) {
    return InvalidError(where + ".unk_token: must be a string or null");
  }
  for (const char* key : {"fuse_unk", "byte_fallback", "ignore_merges"}) {
    const json& v = Field(model, key);
    if (!v.is_null() && !v.is_boolean()) return InvalidError(where + "." + key + ": must be a boolean");
  }
  if (Field(model, "byte_fallback") == true) return Unimplemented(where + ".byte_fallback", "true");
  options.fuse_unk = Field(model, "fuse_unk") == true;
  options.ignore_merges = Field(model, "ignore_merges") == true;
  return options;
}

Result<AddedToken> ParseAddedToken(const json& j, const std::string& where) {
  if (!j.is_object()) return InvalidError(where + ": must be an object");
  const json& id = Field(j, "id");
  const json& content = Field(j, "content");
  if (!id.is_number_unsigned() || id.get<uint64_t>() > 0xFFFFFFFFull) {
    return InvalidError(where + ".id: must be an unsigned 32-bit integer");
  }
  if (!content.is_string() || content.get<std::string>().empty()) {
    return InvalidError(where + ".content: must be a non-empty string");
  }
  AddedToken t;
  t.id = static_cast<uint32_t>(id.get<uint64_t>());
  t.content = content.get<std::string>();
  if (!IsValidUtf8(t.content)) return InvalidError(where + ".content: not valid UTF-8");
  struct Flag { const char* key; bool* dst; bool dflt; };
  for (Flag f : {Flag{"single_word", &t.single_word, false}, Flag{"lstrip", &t.lstrip, false},
                 Flag{"rstrip", &t.rstrip, false}, Flag{"normalized", &t.normalized, true},
                 Flag{"special", &t.special, false}}) {
    const json& v = Field(j, f.key);
    if (!v.is_null() && !v.is_boolean()) return InvalidError(where + "." + f.key + ": must be a boolean");
    *f.dst = v.is_null() ? f.dflt : v.get<bool>();
  }
  return t;
}

// Parses added_tokens and checks each declared id is the id the crate
// would assign (vocab id if the content is in the vocab, else the next free
// id after the vocab), so we never silently disagree with it.
Result<std::vector<AddedToken>> ParseAddedTokens(const json& list, const BpeModel& model,
                                                 const std::string& src) {
  std::vector<AddedToken> tokens;
  if (list.is_null()) return tokens;
  if (!list.is_array()) return InvalidError(src + ": added_tokens: must be an array");
  std::optional<uint32_t> max_added;
  const uint32_t model_size = static_cast<uint32_t>(model.vocab_count());
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = src + ": added_tokens[" + std::to_string(i) + "]";
    LOCKSTEP_ASSIGN_OR_RETURN(AddedToken t, ParseAddedToken(list[i], where));
    for (const AddedToken& prev : tokens) {
      if (prev.content == t.content) return InvalidError(where + ".content: \"" + t.content + "\" repeats an earlier added token");
    }
    uint32_t expected;
    if (auto vid = model.TokenToId(t.content)) {
      expected = *vid;
    } else {
      expected = (max_added && (*max_added >= model_size || model_size == 0)) ? *max_added + 1 : model_size;
    }
    if (t.id != expected) {
      return InvalidError(where + ".id: \"" + t.content + "\" declares id " + std::to_string(t.id) +
                          " but the tokenizers crate would assign " + std::to_string(expected));
    }
    max_added = max_added ? std::max(*max_added, t.id) : t.id;
    tokens.push_back(std::move(t));
  }
  return tokens;
}

// The ByteLevel decoder on one token: a token made only of byte-alphabet
// characters becomes those bytes; any other is kept as its own UTF-8.
// `token` is valid UTF-8 (it came through the JSON parser).
std::string ByteLevelBytes(const std::string& token) {
  std::string bytes;
  const auto* s = reinterpret_cast<const uint8_t*>(token.data());
  const int32_t length = static_cast<int32_t>(token.size());
  for (int32_t i = 0; i < length;) {
    UChar32 c = 0;
    U8_NEXT(s, i, length, c);
    const int b = c < 0 ? -1 : CodepointToByte(static_cast<uint32_t>(c));
    if (b < 0) return token;
    bytes.push_back(static_cast<char>(b));
  }
  return bytes;
}

Result<std::shared_ptr<Tokenizer::Impl>> Build(TokenizerDoc doc, const std::string& src) {
  LOCKSTEP_RETURN_IF_ERROR(CheckTopLevel(doc.root, src));
  const json& model_json = Field(doc.root, "model");
  LOCKSTEP_ASSIGN_OR_RETURN(BpeOptions options, ParseBpeOptions(model_json, src + ": model"));
  if (!doc.has_vocab) return InvalidError(src + ": model.vocab: missing or not an object");
  if (!doc.has_merges) return InvalidError(src + ": model.merges: missing or not an array");
  auto impl = std::make_shared<Tokenizer::Impl>();
  LOCKSTEP_ASSIGN_OR_RETURN(impl->model, BpeModel::Build(std::move(doc.vocab), doc.merges,
                                                         std::move(options), src + ": model"));
  LOCKSTEP_ASSIGN_OR_RETURN(auto added, ParseAddedTokens(Field(doc.root, "added_tokens"),
                                                         impl->model, src));
  impl->vocab_size = impl->model.id_bound();
  for (const AddedToken& t : added) impl->vocab_size = std::max(impl->vocab_size, t.id + 1);
  LOCKSTEP_ASSIGN_OR_RETURN(impl->normalizer,
                            TextNormalizer::Parse(Field(doc.root, "normalizer"), src));
  const TextNormalizer& normalizer = impl->normalizer;
  impl->added = AddedVocabulary(std::move(added), [&normalizer](std::string_view s) {
    return normalizer.Apply(s);
  });
  LOCKSTEP_ASSIGN_OR_RETURN(impl->chain,
                            PreTokenizerChain::Parse(Field(doc.root, "pre_tokenizer"), src));
  impl->id_bytes.resize(impl->vocab_size);
  for (uint32_t id = 0; id < impl->vocab_size; ++id) {
    const AddedToken* added = impl->added.FindById(id);
    const std::string* token = added ? &added->content : impl->model.IdToToken(id);
    if (token != nullptr) impl->id_bytes[id] = ByteLevelBytes(*token);
  }
  return impl;
}

}  // namespace

Result<Tokenizer> Tokenizer::FromJson(std::string_view json_text, const std::string& source_name) {
  try {
    LOCKSTEP_ASSIGN_OR_RETURN(TokenizerDoc doc, ParseTokenizerJson(json_text, source_name));
    return FromDoc(std::move(doc), source_name);
  } catch (const std::exception& e) {  // allocation failure; JSON errors are handled inside
    return InternalError(source_name + ": loading failed: " + e.what());
  }
}

Result<Tokenizer> Tokenizer::FromDoc(TokenizerDoc doc, const std::string& source_name) {
  try {
    LOCKSTEP_ASSIGN_OR_RETURN(auto impl, Build(std::move(doc), source_name));
    return Tokenizer(std::move(impl));
  } catch (const std::exception& e) {  // allocation failure
    return InternalError(source_name + ": loading failed: " + e.what());
  }
}

Result<Tokenizer> Tokenizer::FromFile(const std::string& path) {
  LOCKSTEP_ASSIGN_OR_RETURN(const std::string text,
                            ReadSmallFile(path, kMaxTokenizerFileBytes, "a tokenizer file"));
  return FromJson(text, path);
}

void Tokenizer::Impl::EncodeText(std::string_view text, WordCache* cache,
                                 std::vector<uint32_t>* ids) const {
  const Pieces pieces = chain.Run(icu::UnicodeString::fromUTF8(
      icu::StringPiece(text.data(), static_cast<int32_t>(text.size()))));
  const char16_t* units = pieces.text.getBuffer();
  std::string word;
  for (const PieceRange& r : pieces.ranges) {
    word.clear();
    for (int32_t i = r.begin; i < r.end;) {
      UChar32 c;
      U16_NEXT(units, i, r.end, c);
      AppendUtf8(static_cast<uint32_t>(c), &word);
    }
    model.EncodeWord(word, cache, ids);
  }
}

void Tokenizer::Impl::EncodeRawSegment(std::string_view text, WordCache* cache,
                                       std::vector<uint32_t>* ids) const {
  std::string normalized;
  if (!normalizer.is_identity()) {
    normalized = normalizer.Apply(text);
    text = normalized;
  }
  std::vector<TextSegment> segments;
  added.SplitPass(AddedVocabulary::Pass::kNormalized, text, &segments);
  for (const TextSegment& seg : segments) {
    if (seg.token_id) {
      ids->push_back(*seg.token_id);
    } else {
      EncodeText(seg.text, cache, ids);
    }
  }
}

std::vector<uint32_t> Tokenizer::Encode(std::string_view text) const {
  assert(text.size() < (size_t{1} << 30));  // ICU indexes UTF-16 with int32
  std::string repaired;
  if (!IsValidUtf8(text)) {
    repaired = LossyUtf8(text);
    text = repaired;
  }
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  WordCache cache;
  std::vector<TextSegment> segments;
  impl_->added.SplitPass(AddedVocabulary::Pass::kRaw, text, &segments);
  for (const TextSegment& seg : segments) {
    if (seg.token_id) {
      ids.push_back(*seg.token_id);
    } else {
      impl_->EncodeRawSegment(seg.text, &cache, &ids);
    }
  }
  return ids;
}

std::string Tokenizer::Decode(std::span<const uint32_t> ids) const {
  std::string bytes;
  for (uint32_t id : ids) {
    if (id < impl_->id_bytes.size()) bytes += impl_->id_bytes[id];
  }
  return LossyUtf8(bytes);
}

uint32_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::optional<std::string> Tokenizer::FirstSpecialToken(std::string_view text) const {
  for (uint32_t id : Encode(text)) {
    const AddedToken* t = impl_->added.FindById(id);
    if (t != nullptr && t->special) return t->content;
  }
  return std::nullopt;
}

std::optional<uint32_t> Tokenizer::TokenToId(std::string_view token) const {
  for (const AddedToken& t : impl_->added.tokens()) {
    if (t.content == token) return t.id;
  }
  return impl_->model.TokenToId(token);
}

}  // namespace lockstep
