#include "engine/tokenizer/normalizer.h"

#include <unicode/bytestream.h>

namespace lockstep {
namespace {

using json = nlohmann::json;

Result<const icu::Normalizer2*> Lookup(const std::string& type, const std::string& where) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* n = nullptr;
  if (type == "NFC") n = icu::Normalizer2::getNFCInstance(status);
  else if (type == "NFD") n = icu::Normalizer2::getNFDInstance(status);
  else if (type == "NFKC") n = icu::Normalizer2::getNFKCInstance(status);
  else if (type == "NFKD") n = icu::Normalizer2::getNFKDInstance(status);
  else return UnimplementedError(where + ": normalizer \"" + type + "\" is not supported");
  if (U_FAILURE(status) || n == nullptr) {
    return InternalError(where + ": ICU has no " + type + " data (" + u_errorName(status) + ")");
  }
  return n;
}

Status ParseInto(const json& j, const std::string& where,
                 std::vector<const icu::Normalizer2*>* steps) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return InvalidError(where + ": must be an object with a string \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type != "Sequence") {
    LOCKSTEP_ASSIGN_OR_RETURN(const icu::Normalizer2* n, Lookup(type, where + ".type"));
    steps->push_back(n);
    return Status::Ok();
  }
  auto list = j.find("normalizers");
  if (list == j.end() || !list->is_array()) return InvalidError(where + ".normalizers: must be an array");
  for (size_t i = 0; i < list->size(); ++i) {
    LOCKSTEP_RETURN_IF_ERROR(
        ParseInto((*list)[i], where + ".normalizers[" + std::to_string(i) + "]", steps));
  }
  return Status::Ok();
}

}  // namespace

Result<TextNormalizer> TextNormalizer::Parse(const nlohmann::json& config,
                                             const std::string& source) {
  TextNormalizer n;
  if (config.is_null()) return n;
  LOCKSTEP_RETURN_IF_ERROR(ParseInto(config, source + ": normalizer", &n.steps_));
  return n;
}

std::string TextNormalizer::Apply(std::string_view text) const {
  std::string cur(text);
  for (const icu::Normalizer2* n : steps_) {
    std::string next;
    icu::StringByteSink<std::string> sink(&next);
    UErrorCode status = U_ZERO_ERROR;
    n->normalizeUTF8(0, icu::StringPiece(cur.data(), static_cast<int32_t>(cur.size())), sink,
                     nullptr, status);
    if (U_SUCCESS(status)) cur = std::move(next);
  }
  return cur;
}

}  // namespace lockstep
