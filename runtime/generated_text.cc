#include "runtime/generated_text.h"

#include "runtime/model_tokenizer.h"

namespace lockstep::runtime {

std::optional<std::string> DecodeText(const ModelFiles& files, const std::vector<uint32_t>& ids) {
  auto tok = LoadModelTokenizer(files);
  if (!tok.ok()) return std::nullopt;
  return DecodeText(&*tok, ids);
}

std::optional<std::string> DecodeText(const Tokenizer* tokenizer, const std::vector<uint32_t>& ids) {
  if (tokenizer == nullptr) return std::nullopt;
  return tokenizer->Decode(ids);
}

}  // namespace lockstep::runtime
